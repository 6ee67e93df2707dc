import type { Db } from '../db/driver.js';
import type { Clock } from '../clock.js';
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

/** One retention step of a domain: deletes what has expired and says how many rows. */
export interface Purge {
  /** The log field its count is reported under. */
  name: string;
  run(now: Date): Promise<number>;
}

/**
 * Retention: the domains' purges in the order given (a domain that refers to another's rows purges first),
 * then finished jobs after 7 days. Reschedules itself in the transaction that completes it. The purges are
 * passed in, so the job layer knows no domain.
 */
export function registerMaintenance(runner: JobRunner, deps: { db: Db; purges: readonly Purge[] }): JobWorker {
  runner.register(MAINTENANCE_TASK, async (job, ctx) => {
    const now = ctx.clock.now();
    const counts: Record<string, number> = {};
    for (const purge of deps.purges) counts[purge.name] = await purge.run(now);
    counts.jobs = await jobRepo.purgeFinished(deps.db, new Date(now.getTime() - FINISHED_JOB_RETENTION_MS), job.id);
    await deps.db.transaction(async (tx) => {
      await ctx.completeIn(tx);
      await enqueue(tx, now, { task: MAINTENANCE_TASK, dedupeKey: MAINTENANCE_TASK, runAt: new Date(now.getTime() + EVERY_MS), maxAttempts: 5 });
    });
    if (Object.values(counts).some((count) => count > 0)) {
      ctx.log.info(counts, 'retention purge');
    }
  });
  return { schedule: (db, clock) => scheduleMaintenance(db, clock) };
}
