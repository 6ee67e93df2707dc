import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { DomainError } from '../errors.js';
import { stableStringify } from '../util/stable-json.js';
import { idempotencyRepo } from './idempotency-repo.js';

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
  const ref = { tenantId: req.tenantId, operation: req.operation, key: req.key };

  const replay = await db.transaction(async (tx) => {
    const now = clock.now();
    if (await idempotencyRepo.claim(tx, ref, hash, now, new Date(now.getTime() + RETENTION_MS))) return undefined;
    const row = await idempotencyRepo.lock(tx, ref);
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
    await idempotencyRepo.takeOver(tx, ref, hash, now, new Date(now.getTime() + RETENTION_MS), expired);
    return undefined;
  });
  if (replay) return replay;

  try {
    return await db.transaction(async (tx) => {
      const result = await execute(tx);
      await idempotencyRepo.complete(tx, ref, result.status, JSON.stringify(result.body));
      return { ...result, replayed: false };
    });
  } catch (error) {
    await idempotencyRepo.release(db, ref).catch(() => undefined);
    throw error;
  }
}

/** Deletes stored responses past their 24 hours (run by the retention job). */
export async function purgeExpiredIdempotencyKeys(db: Db, now: Date): Promise<number> {
  return idempotencyRepo.purgeExpired(db, now);
}
