import type { Tx } from '../db/driver.js';
import { jobRepo } from './job-repo.js';
import type { PayloadOf } from './tasks.js';

/**
 * The wake-up channel of one task's jobs: a worker listens on the channels of the tasks it runs and wakes only the
 * loop that claims that task, so a queued send does not make every loop of every worker look for work.
 */
export function jobsChannel(task: string): string {
  return `jobs.${task}`;
}

/** With a schema of at most 30 characters (src/config.ts), `<schema>.jobs.<task>` fits PostgreSQL's 63-byte names. */
export const MAX_TASK_NAME = 27;

interface EnqueueCommon<T extends string> {
  task: T;
  tenantId?: string;
  runAt?: Date;
  /** At most one queued or running job per (task, dedupeKey). */
  dedupeKey?: string;
  maxAttempts?: number;
}

/** The payload is required exactly when the task declares one (src/jobs/tasks.ts). */
export type EnqueueOptions<T extends string> = EnqueueCommon<T> &
  (Record<string, never> extends PayloadOf<T> ? { payload?: PayloadOf<T> } : { payload: PayloadOf<T> });

/**
 * Adds a job inside the caller's transaction: the job exists exactly when the state change that
 * needs it commits. Returns the job id, or undefined when a job with the same dedupe key is pending.
 */
export async function enqueue<T extends string>(tx: Tx, now: Date, options: EnqueueOptions<T>): Promise<number | undefined> {
  const id = await jobRepo.insert(
    tx,
    {
      task: options.task,
      tenantId: options.tenantId ?? null,
      payload: JSON.stringify(options.payload ?? {}),
      dedupeKey: options.dedupeKey ?? null,
      runAt: options.runAt ?? now,
      maxAttempts: options.maxAttempts ?? 10,
    },
    now,
  );
  if (id !== undefined) tx.notify(jobsChannel(options.task));
  return id;
}
