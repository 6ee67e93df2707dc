import type { Queryable } from '../db/driver.js';

export interface IdempotencyKeyRow {
  request_hash: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_body: unknown;
  locked_at: Date;
  expires_at: Date;
}

/** What an earlier use of a key left: enough to replay its answer or refuse a different request. */
export type StoredUse = Pick<IdempotencyKeyRow, 'request_hash' | 'state' | 'response_status' | 'response_body'>;

/** One Idempotency-Key of one operation of one tenant. */
export interface KeyRef {
  tenantId: string;
  operation: string;
  key: string;
}

const refParams = (ref: KeyRef) => [ref.tenantId, ref.operation, ref.key];

export const idempotencyRepo = {
  /**
   * Takes the key's transaction-scoped advisory lock without waiting; false while another transaction (a request
   * still running, on any node) holds it. Two keys sharing a 64-bit hash only ever see a spurious "in progress".
   */
  async tryLock(db: Queryable, ref: KeyRef): Promise<boolean> {
    const rows = await db.query<{ locked: boolean }>(
      `SELECT pg_try_advisory_xact_lock(hashtextextended($1 || '|' || $2 || '|' || $3, 0)) AS locked`,
      refParams(ref),
    );
    return rows[0].locked;
  },

  async find(db: Queryable, ref: KeyRef): Promise<IdempotencyKeyRow | undefined> {
    const rows = await db.query<IdempotencyKeyRow>('SELECT * FROM idempotency_keys WHERE tenant_id = $1 AND operation = $2 AND key = $3', refParams(ref));
    return rows[0];
  },

  /** Stores the completed response; an expired (or abandoned) earlier use of the key is replaced. */
  async store(db: Queryable, ref: KeyRef, stored: { hash: string; status: number; body: string; now: Date; expiresAt: Date }): Promise<void> {
    await db.query(
      `INSERT INTO idempotency_keys (tenant_id, operation, key, request_hash, state, response_status, response_body, locked_at, created_at, expires_at)
       VALUES ($1, $2, $3, $4, 'completed', $5, $6, $7, $7, $8)
       ON CONFLICT (tenant_id, operation, key) DO UPDATE SET request_hash = excluded.request_hash, state = 'completed',
         response_status = excluded.response_status, response_body = excluded.response_body, locked_at = excluded.locked_at,
         created_at = excluded.created_at, expires_at = excluded.expires_at`,
      [...refParams(ref), stored.hash, stored.status, stored.body, stored.now, stored.expiresAt],
    );
  },

  /** Retention, across tenants: deletes stored responses that expired before `now`. */
  async purgeExpired(db: Queryable, now: Date): Promise<number> {
    const rows = await db.query('DELETE FROM idempotency_keys WHERE expires_at < $1 RETURNING key', [now]);
    return rows.length;
  },
};
