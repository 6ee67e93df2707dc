import type { Queryable } from '../db/driver.js';

/** What an earlier use of a key left: enough to replay its answer or refuse a different request. */
export interface StoredUse {
  request_hash: string;
  response_status: number;
  /** The stored body's JSON text. */
  response_body: string;
}

/** One Idempotency-Key of one operation of one tenant. */
export interface KeyRef {
  tenantId: string;
  operation: string;
  key: string;
}

export type Claim = { outcome: 'free' } | { outcome: 'running' } | { outcome: 'taken'; stored: StoredUse };

interface ClaimRow {
  outcome: Claim['outcome'];
  stored_hash: string | null;
  stored_status: number | null;
  stored_body: string | null;
}

/** The statements of the protocol: src/platform/sql/idempotency_claim.sql and idempotency_store.sql. */
export const idempotencyRepo = {
  /** Step 1: the key's lock (without waiting: `running` while another transaction holds it) and its unexpired use. */
  async claim(db: Queryable, ref: KeyRef, now: Date): Promise<Claim> {
    const rows = await db.query<ClaimRow>('SELECT outcome, stored_hash, stored_status, stored_body::text AS stored_body FROM idempotency_claim($1, $2, $3, $4, false)', [ref.tenantId, ref.operation, ref.key, now]);
    return toClaim(rows[0]);
  },

  /** Step 3: the answer, committed with the request's writes. */
  async store(db: Queryable, ref: KeyRef, stored: { hash: string; status: number; body: string; now: Date; expiresAt: Date }): Promise<void> {
    await db.query('SELECT idempotency_store($1, $2, $3, $4, $5, $6::jsonb, $7, $8)', [
      ref.tenantId,
      ref.operation,
      ref.key,
      stored.hash,
      stored.status,
      stored.body,
      stored.now,
      stored.expiresAt,
    ]);
  },

  /** Retention, across tenants: deletes stored responses that expired before `now`. */
  async purgeExpired(db: Queryable, now: Date): Promise<number> {
    const rows = await db.query('DELETE FROM idempotency_keys WHERE expires_at < $1 RETURNING key', [now]);
    return rows.length;
  },
};

/** A row of idempotency_claim as a Claim. */
function toClaim(row: ClaimRow | undefined): Claim {
  if (row?.outcome === 'taken') return { outcome: 'taken', stored: { request_hash: row.stored_hash ?? '', response_status: row.stored_status ?? 200, response_body: row.stored_body ?? 'null' } };
  return row?.outcome === 'running' ? { outcome: 'running' } : { outcome: 'free' };
}
