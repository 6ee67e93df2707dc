import type { Clock } from '../clock.js';
import type { Db } from '../db/driver.js';
import { enqueue } from '../jobs/queue.js';
import type { JobRunner } from '../jobs/runner.js';
import type { ReservationService } from './service.js';
import type { TaskName } from '../jobs/tasks.js';
import type { JobWorker } from '../jobs/worker.js';

export const PRE_CHECKIN_TASK = 'reservations.pre_checkin' satisfies TaskName;
const EVERY_MS = 60 * 60 * 1000;

/** Schedules the hourly pre_checkin pass once across all workers (the dedupe key keeps it single). */
export async function schedulePreCheckin(db: Db, clock: Clock, runAt?: Date): Promise<void> {
  await db.transaction((tx) => enqueue(tx, clock.now(), { task: PRE_CHECKIN_TASK, dedupeKey: PRE_CHECKIN_TASK, runAt: runAt ?? clock.now(), maxAttempts: 5 }));
}

/**
 * The pre_checkin lifecycle event: confirmed stays whose check-in is within LIFECYCLE_PRE_CHECKIN_DAYS
 * of the business's today. Each mirror commits on its own, so a crash mid-pass repeats nothing already
 * done (the mirror records its pre_checkin progress). Reschedules itself in the transaction that completes it.
 */
export function registerPreCheckin(runner: JobRunner, deps: { db: Db; reservations: ReservationService }): JobWorker {
  runner.register(PRE_CHECKIN_TASK, async (_job, ctx) => {
    const now = ctx.clock.now();
    const seen = await deps.reservations.runPreCheckinSchedule(now);
    await deps.db.transaction(async (tx) => {
      await ctx.completeIn(tx);
      await enqueue(tx, now, { task: PRE_CHECKIN_TASK, dedupeKey: PRE_CHECKIN_TASK, runAt: new Date(now.getTime() + EVERY_MS), maxAttempts: 5 });
    });
    if (seen > 0) ctx.log.info({ mirrors: seen }, 'pre_checkin pass');
  });
  return { schedule: (db, clock) => schedulePreCheckin(db, clock) };
}
