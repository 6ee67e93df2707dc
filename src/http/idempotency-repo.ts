import type { Queryable } from '../db/driver.js';

export interface IdempotencyKeyRow {
  request_hash: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_body: unknown;
  locked_at: Date;
  expires_at: Date;
}

/** One Idempotency-Key of one operation of one tenant. */
export interface KeyRef {
  tenantId: string;
  operation: string;
  key: string;
}

const refParams = (ref: KeyRef) => [ref.tenantId, ref.operation, ref.key];

export const idempotencyRepo = {
  /** Claims a fresh key (in progress); false when the key exists already. */
  async claim(db: Queryable, ref: KeyRef, hash: string, now: Date, expiresAt: Date): Promise<boolean> {
    const rows = await db.query(
      `INSERT INTO idempotency_keys (tenant_id, operation, key, request_hash, state, locked_at, created_at, expires_at)
       VALUES ($1, $2, $3, $4, 'in_progress', $5, $5, $6) ON CONFLICT DO NOTHING RETURNING key`,
      [...refParams(ref), hash, now, expiresAt],
    );
    return rows.length > 0;
  },

  async lock(db: Queryable, ref: KeyRef): Promise<IdempotencyKeyRow> {
    const [row] = await db.query<IdempotencyKeyRow>('SELECT * FROM idempotency_keys WHERE tenant_id = $1 AND operation = $2 AND key = $3 FOR UPDATE', refParams(ref));
    return row;
  },

  /** Takes an expired or stale key over for a new request (an expired one starts a new 24 hours). */
  async takeOver(db: Queryable, ref: KeyRef, hash: string, now: Date, expiresAt: Date, expired: boolean): Promise<void> {
    await db.query(
      `UPDATE idempotency_keys SET request_hash = $4, state = 'in_progress', response_status = NULL, response_body = NULL,
         locked_at = $5, created_at = CASE WHEN $7 THEN $5 ELSE created_at END, expires_at = CASE WHEN $7 THEN $6 ELSE expires_at END
       WHERE tenant_id = $1 AND operation = $2 AND key = $3`,
      [...refParams(ref), hash, now, expiresAt, expired],
    );
  },

  async complete(db: Queryable, ref: KeyRef, status: number, body: string): Promise<void> {
    await db.query(
      `UPDATE idempotency_keys SET state = 'completed', response_status = $4, response_body = $5
       WHERE tenant_id = $1 AND operation = $2 AND key = $3`,
      [...refParams(ref), status, body],
    );
  },

  /** Releases a key whose request failed, so a corrected request can use it. */
  async release(db: Queryable, ref: KeyRef): Promise<void> {
    await db.query(`DELETE FROM idempotency_keys WHERE tenant_id = $1 AND operation = $2 AND key = $3 AND state = 'in_progress'`, refParams(ref));
  },

  /** Retention, across tenants: deletes stored responses that expired before `now`. */
  async purgeExpired(db: Queryable, now: Date): Promise<number> {
    const rows = await db.query('DELETE FROM idempotency_keys WHERE expires_at < $1 RETURNING key', [now]);
    return rows.length;
  },
};
