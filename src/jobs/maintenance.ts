import type { Db } from '../db/driver.js';
import type { Clock } from '../clock.js';
import { purgeExpiredIdempotencyKeys } from '../platform/idempotency.js';
import type { EventService } from '../events/service.js';
import type { WebhookService } from '../webhooks/service.js';
import { jobRepo } from './job-repo.js';
import { enqueue } from './queue.js';
import type { JobRunner } from './runner.js';
import type { TaskName } from './tasks.js';
import type { JobWorker } from './worker.js';

export const MAINTENANCE_TASK = 'maintenance' satisfies TaskName;
const EVERY_MS = 60 * 60 * 1000;
const FINISHED_JOB_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** Schedules the hourly retention job once across all workers (the dedupe key keeps it single). */
export async function scheduleMaintenance(db: Db, clock: Clock, runAt?: Date): Promise<void> {
  await db.transaction((tx) => enqueue(tx, clock.now(), { task: MAINTENANCE_TASK, dedupeKey: MAINTENANCE_TASK, runAt: runAt ?? clock.now(), maxAttempts: 5 }));
}

/**
 * Retention: webhook delivery metadata 30 days after completion, events after 30 days, stored idempotent responses after
 * 24 hours, finished jobs after 7 days. Reschedules itself in the transaction that completes it.
 */
export function registerMaintenance(runner: JobRunner, deps: { db: Db; webhooks: WebhookService; events: EventService }): JobWorker {
  runner.register(MAINTENANCE_TASK, async (job, ctx) => {
    const now = ctx.clock.now();
    const deliveries = await deps.webhooks.purgeExpired();
    // After the deliveries: an event is kept while a delivery still refers to it.
    const events = await deps.events.purgeExpired();
    const idempotencyKeys = await purgeExpiredIdempotencyKeys(deps.db, now);
    const jobs = await jobRepo.purgeFinished(deps.db, new Date(now.getTime() - FINISHED_JOB_RETENTION_MS), job.id);
    await deps.db.transaction(async (tx) => {
      await ctx.completeIn(tx);
      await enqueue(tx, now, { task: MAINTENANCE_TASK, dedupeKey: MAINTENANCE_TASK, runAt: new Date(now.getTime() + EVERY_MS), maxAttempts: 5 });
    });
    if (deliveries + events + idempotencyKeys + jobs > 0) {
      ctx.log.info({ deliveries, events, idempotencyKeys, jobs }, 'retention purge');
    }
  });
  return { schedule: (db, clock) => scheduleMaintenance(db, clock) };
}
