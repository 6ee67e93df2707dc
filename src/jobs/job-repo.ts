import type { Queryable } from '../db/driver.js';

/**
 * The job queue's statements. Jobs of every tenant share one queue: rows are addressed by id and fenced by
 * the worker's lease (`locked_by`), so these writes filter by worker, not by tenant.
 */

export interface JobRow {
  id: number;
  task: string;
  tenant_id: string | null;
  payload: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
}

export interface NewJob {
  task: string;
  tenantId: string | null;
  /** JSON text. */
  payload: string;
  dedupeKey: string | null;
  runAt: Date;
  maxAttempts: number;
}

export const jobRepo = {
  /** The new job's id, or undefined when a job with the same dedupe key is queued or running. */
  async insert(db: Queryable, job: NewJob, now: Date): Promise<number | undefined> {
    const rows = await db.query<{ id: number }>(
      `INSERT INTO jobs (task, tenant_id, payload, dedupe_key, run_at, max_attempts, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
       ON CONFLICT (task, dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'running') DO NOTHING
       RETURNING id`,
      [job.task, job.tenantId, job.payload, job.dedupeKey, job.runAt, job.maxAttempts, now],
    );
    return rows[0]?.id;
  },

  /**
   * Leases up to `limit` jobs of these tasks, never one of `running` (this worker's own): expired leases first,
   * then due jobs oldest first. Each side is an ordered index scan that stops at `limit`, so a claim costs
   * the same with a backlog of ten jobs or of a million (jobs_claim: src/jobs/sql/jobs_claim.sql).
   */
  claim(db: Queryable, claim: { workerId: string; leaseUntil: Date; now: Date; tasks: string[]; limit: number; running: number[] }): Promise<JobRow[]> {
    return db.query<JobRow>('SELECT * FROM jobs_claim($1, $2, $3, $4::text[], $5, $6::bigint[])', [
      claim.workerId,
      claim.leaseUntil,
      claim.now,
      claim.tasks,
      claim.limit,
      claim.running,
    ]);
  },

  /** Hands leases back: the jobs are queued again at once. */
  async release(db: Queryable, workerId: string, ids: number[], now: Date): Promise<void> {
    await db.query(
      `UPDATE jobs SET state = 'queued', locked_by = NULL, locked_until = NULL, run_at = $3, updated_at = $3
       WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND state = 'running'`,
      [ids, workerId, now],
    );
  },

  async retryLater(db: Queryable, workerId: string, id: number, retryAt: Date, error: string, now: Date): Promise<void> {
    await db.query(
      `UPDATE jobs SET state = 'queued', run_at = $3, last_error = $4, locked_by = NULL, locked_until = NULL, updated_at = $5
       WHERE id = $1 AND locked_by = $2 AND state = 'running'`,
      [id, workerId, retryAt, error, now],
    );
  },

  /** Marks the job succeeded; false when this worker no longer holds its lease. */
  async complete(db: Queryable, workerId: string, id: number, now: Date): Promise<boolean> {
    const rows = await db.query(
      `UPDATE jobs SET state = 'succeeded', finished_at = $3, updated_at = $3, locked_by = NULL, locked_until = NULL
       WHERE id = $1 AND locked_by = $2 AND state = 'running' RETURNING id`,
      [id, workerId, now],
    );
    return rows.length > 0;
  },

  /** Marks these jobs succeeded; how many this worker still held the lease of. */
  async completeAll(db: Queryable, workerId: string, ids: readonly number[], now: Date): Promise<number> {
    const rows = await db.query(
      `UPDATE jobs SET state = 'succeeded', finished_at = $3, updated_at = $3, locked_by = NULL, locked_until = NULL
       WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND state = 'running' RETURNING id`,
      [ids, workerId, now],
    );
    return rows.length;
  },

  async finish(db: Queryable, workerId: string, id: number, state: 'succeeded' | 'failed', error: string | null, now: Date): Promise<void> {
    await db.query(
      `UPDATE jobs SET state = $3, finished_at = $4, updated_at = $4, last_error = COALESCE($5, last_error), locked_by = NULL, locked_until = NULL
       WHERE id = $1 AND locked_by = $2 AND state = 'running'`,
      [id, workerId, state, now, error],
    );
  },

  async extendLeases(db: Queryable, workerId: string, ids: readonly number[], until: Date): Promise<void> {
    await db.query(`UPDATE jobs SET locked_until = $3 WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND state = 'running'`, [ids, workerId, until]);
  },

  /** Deletes jobs finished before `cutoff` (but never `keep`, the job doing the purge); returns how many. */
  async purgeFinished(db: Queryable, cutoff: Date, keep: number): Promise<number> {
    const rows = await db.query(`DELETE FROM jobs WHERE state IN ('succeeded', 'failed') AND finished_at < $1 AND id <> $2 RETURNING id`, [cutoff, keep]);
    return rows.length;
  },
};
