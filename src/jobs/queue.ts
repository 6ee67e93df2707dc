import type { Tx } from '../db/driver.js';

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
  const rows = await tx.query<{ id: number }>(
    `INSERT INTO jobs (task, tenant_id, payload, dedupe_key, run_at, max_attempts, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
     ON CONFLICT (task, dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'running') DO NOTHING
     RETURNING id`,
    [
      options.task,
      options.tenantId ?? null,
      JSON.stringify(options.payload ?? {}),
      options.dedupeKey ?? null,
      options.runAt ?? now,
      options.maxAttempts ?? 10,
      now,
    ],
  );
  if (rows.length > 0) tx.notify(JOBS_CHANNEL);
  return rows[0]?.id;
}
