import type { Queryable } from '../db/driver.js';
import { newId } from '../ids.js';
import type { TaskName } from '../jobs/tasks.js';

export const CALLBACK_TASK = 'channels.process-callback' satisfies TaskName;
/** As every queued job (src/jobs/queue.ts). */
const CALLBACK_MAX_ATTEMPTS = 10;

export interface CallbackRow {
  id: string;
  provider: string;
  object: string;
  body: string;
  received_at: Date;
  processed_at: Date | null;
}

export const callbackRepo = {
  /**
   * Stores verified callbacks and queues the processing job of each, in one statement committed on its own (one
   * round trip): each is stored exactly when it is queued, and the workers are notified (`jobsChannel`, the
   * database's name of the callback task's jobs channel) when it commits. The callbacks' ids, in order.
   */
  async store(db: Queryable, callbacks: ReadonlyArray<{ provider: string; object: string; body: string }>, now: Date, jobsChannel: string): Promise<string[]> {
    const ids = callbacks.map(() => newId('cb'));
    await db.query(
      `WITH stored AS (
         INSERT INTO provider_callbacks (id, provider, object, body, received_at)
         SELECT c.id, c.provider, c.object, c.body, $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS c(id, provider, object, body)
         RETURNING id
       ), queued AS (
         INSERT INTO jobs (task, payload, run_at, max_attempts, created_at, updated_at)
         SELECT $6, jsonb_build_object('callbackId', stored.id), $5, $7, $5, $5 FROM stored
         RETURNING id
       )
       SELECT pg_notify($8, '') FROM (SELECT count(*) FROM queued) AS q`,
      [ids, callbacks.map((c) => c.provider), callbacks.map((c) => c.object), callbacks.map((c) => c.body), now, CALLBACK_TASK, CALLBACK_MAX_ATTEMPTS, jobsChannel],
    );
    return ids;
  },

  getMany(db: Queryable, ids: readonly string[]): Promise<CallbackRow[]> {
    return db.query<CallbackRow>('SELECT * FROM provider_callbacks WHERE id = ANY($1::text[])', [ids]);
  },

  async markProcessed(db: Queryable, ids: readonly string[], now: Date): Promise<void> {
    if (ids.length === 0) return;
    await db.query('UPDATE provider_callbacks SET processed_at = $2 WHERE id = ANY($1::text[])', [ids, now]);
  },

  /** Deletes processed callbacks received before `cutoff` (retention); how many. Unprocessed ones are kept. */
  async purgeProcessed(db: Queryable, cutoff: Date): Promise<number> {
    const rows = await db.query('DELETE FROM provider_callbacks WHERE processed_at IS NOT NULL AND processed_at < $1 RETURNING id', [cutoff]);
    return rows.length;
  },
};

/**
 * How long a processed callback is kept: Meta retries a callback for up to 7 days, and the body holds guests'
 * messages, kept as messages anyway; a week leaves time to look into a processing problem.
 */
export const CALLBACK_RETENTION_MS = 7 * 24 * 3600 * 1000;
