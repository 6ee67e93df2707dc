import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { DomainError } from '../errors.js';
import { stableStringify } from '../util/stable-json.js';

const RETENTION_MS = 24 * 60 * 60 * 1000;
/** An in-progress claim older than this is taken to belong to a crashed request and may be taken over. */
const STALE_LOCK_MS = 60 * 1000;

export interface IdempotentRequest {
  tenantId: string;
  /** Names the operation, so one key may be used on different operations. */
  operation: string;
  key: string;
  /** Everything that makes two requests "the same": body and path parameters. */
  request: unknown;
}

export interface StoredResponse<B> {
  status: number;
  body: B;
  replayed: boolean;
}

interface KeyRow {
  request_hash: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_body: unknown;
  locked_at: Date;
  expires_at: Date;
}

export function requestHash(request: unknown): string {
  return createHash('sha256').update(stableStringify(request)).digest('hex');
}

/**
 * Runs `execute` at most once per (tenant, operation, key) within 24 hours. The response is stored in the
 * same transaction as the state change `execute` makes, so a crash can never leave one without the other.
 * A retry with the same request replays the stored response; a different request, or one that arrives
 * while the first is still running, gets 409 M2M_IDEMPOTENCY_CONFLICT. Errors are not stored: the key
 * is released so a corrected request can use it.
 */
export async function runIdempotent<B>(
  db: Db,
  clock: Clock,
  req: IdempotentRequest,
  execute: (tx: Tx) => Promise<{ status: number; body: B }>,
): Promise<StoredResponse<B>> {
  const hash = requestHash(req.request);
  const keyParams = [req.tenantId, req.operation, req.key];

  const replay = await db.transaction(async (tx) => {
    const now = clock.now();
    const inserted = await tx.query(
      `INSERT INTO idempotency_keys (tenant_id, operation, key, request_hash, state, locked_at, created_at, expires_at)
       VALUES ($1, $2, $3, $4, 'in_progress', $5, $5, $6) ON CONFLICT DO NOTHING RETURNING key`,
      [...keyParams, hash, now, new Date(now.getTime() + RETENTION_MS)],
    );
    if (inserted.length > 0) return undefined;
    const [row] = await tx.query<KeyRow>(
      'SELECT * FROM idempotency_keys WHERE tenant_id = $1 AND operation = $2 AND key = $3 FOR UPDATE',
      keyParams,
    );
    const expired = row.expires_at.getTime() <= now.getTime();
    const stale = row.state === 'in_progress' && row.locked_at.getTime() <= now.getTime() - STALE_LOCK_MS;
    if (!expired) {
      if (row.request_hash !== hash) {
        throw new DomainError('M2M_IDEMPOTENCY_CONFLICT', 'Idempotency-Key was already used with a different request', {
          idempotencyKey: req.key,
        });
      }
      if (row.state === 'completed') return { status: row.response_status ?? 200, body: row.response_body as B, replayed: true };
      if (!stale) {
        throw new DomainError('M2M_IDEMPOTENCY_CONFLICT', 'a request with this Idempotency-Key is still being processed; retry later', {
          idempotencyKey: req.key,
        });
      }
    }
    await tx.query(
      `UPDATE idempotency_keys SET request_hash = $4, state = 'in_progress', response_status = NULL, response_body = NULL,
         locked_at = $5, created_at = CASE WHEN $7 THEN $5 ELSE created_at END, expires_at = CASE WHEN $7 THEN $6 ELSE expires_at END
       WHERE tenant_id = $1 AND operation = $2 AND key = $3`,
      [...keyParams, hash, now, new Date(now.getTime() + RETENTION_MS), expired],
    );
    return undefined;
  });
  if (replay) return replay;

  try {
    return await db.transaction(async (tx) => {
      const result = await execute(tx);
      await tx.query(
        `UPDATE idempotency_keys SET state = 'completed', response_status = $4, response_body = $5
         WHERE tenant_id = $1 AND operation = $2 AND key = $3`,
        [...keyParams, result.status, JSON.stringify(result.body)],
      );
      return { ...result, replayed: false };
    });
  } catch (error) {
    await db
      .query(`DELETE FROM idempotency_keys WHERE tenant_id = $1 AND operation = $2 AND key = $3 AND state = 'in_progress'`, keyParams)
      .catch(() => undefined);
    throw error;
  }
}

/** Deletes stored responses past their 24 hours (run by the retention job). */
export async function purgeExpiredIdempotencyKeys(db: Db, now: Date): Promise<number> {
  const rows = await db.query('DELETE FROM idempotency_keys WHERE expires_at < $1 RETURNING key', [now]);
  return rows.length;
}
