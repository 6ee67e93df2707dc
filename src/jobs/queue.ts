import type { Tx } from '../db/driver.js';
import { jobRepo } from './job-repo.js';

export const JOBS_CHANNEL = 'jobs';

export interface EnqueueOptions {
  task: string;
  payload?: Record<string, unknown>;
  tenantId?: string;
  runAt?: Date;
  /** At most one queued or running job per (task, dedupeKey). */
  dedupeKey?: string;
  maxAttempts?: number;
}

/**
 * Adds a job inside the caller's transaction: the job exists exactly when the state change that
 * needs it commits. Returns the job id, or undefined when a job with the same dedupe key is pending.
 */
export async function enqueue(tx: Tx, now: Date, options: EnqueueOptions): Promise<number | undefined> {
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
  if (id !== undefined) tx.notify(JOBS_CHANNEL);
  return id;
}
