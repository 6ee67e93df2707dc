import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { DomainError } from '../errors.js';
import { stableStringify } from '../util/stable-json.js';
import { idempotencyRepo, type IdempotencyKeyRow, type StoredUse } from './idempotency-repo.js';

const RETENTION_MS = 24 * 60 * 60 * 1000;
/** An in-progress claim (written by earlier versions) older than this belongs to a crashed request and may be taken over. */
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
 * Runs `execute` at most once per (tenant, operation, key) within 24 hours, in one transaction with the stored
 * response: the key's advisory lock is taken first, so a crash can never leave a state change without its
 * stored response, or a claimed key without its request (the rollback releases both). A retry with the same
 * request replays the stored response; a different request, or one that arrives while the first is still
 * running, gets 409 M2M_IDEMPOTENCY_CONFLICT. Errors are not stored: the rollback leaves the key free for a
 * corrected request.
 */
export async function runIdempotent<B>(
  db: Db,
  clock: Clock,
  req: IdempotentRequest,
  execute: (tx: Tx) => Promise<{ status: number; body: B }>,
): Promise<StoredResponse<B>> {
  const hash = requestHash(req.request);
  const ref = { tenantId: req.tenantId, operation: req.operation, key: req.key };

  return db.transaction(async (tx) => {
    if (!(await idempotencyRepo.tryLock(tx, ref))) throw stillRunning(req.key);
    const now = clock.now();
    const row = await idempotencyRepo.find(tx, ref);
    if (row && row.expires_at.getTime() > now.getTime() && (row.state === 'completed' || row.request_hash !== hash || !isStale(row, now))) {
      return answerTaken<B>(req.key, hash, row);
    }
    const result = await execute(tx);
    await idempotencyRepo.store(tx, ref, { hash, status: result.status, body: JSON.stringify(result.body), now, expiresAt: keyLifetime(now).expiresAt });
    return { ...result, replayed: false };
  });
}

/**
 * When a key used now expires, and before when an in-progress claim (written by earlier versions) belongs to a
 * crashed request and may be taken over.
 */
export function keyLifetime(now: Date): { expiresAt: Date; staleBefore: Date } {
  return { expiresAt: new Date(now.getTime() + RETENTION_MS), staleBefore: new Date(now.getTime() - STALE_LOCK_MS) };
}

function isStale(row: Pick<IdempotencyKeyRow, 'locked_at'>, now: Date): boolean {
  return row.locked_at.getTime() <= keyLifetime(now).staleBefore.getTime();
}

/**
 * The answer to a request whose key holds an unexpired earlier use: that use's stored response when the requests
 * are the same, else 409. An in-progress row is a claim committed by the two-transaction protocol of earlier
 * versions (a node not yet upgraded): honoured until it is old enough to belong to a crashed request.
 */
export function answerTaken<B>(key: string, hash: string, row: StoredUse): StoredResponse<B> {
  if (row.request_hash !== hash) {
    throw new DomainError('M2M_IDEMPOTENCY_CONFLICT', 'Idempotency-Key was already used with a different request', { idempotencyKey: key });
  }
  if (row.state === 'completed') return { status: row.response_status ?? 200, body: row.response_body as B, replayed: true };
  throw stillRunning(key);
}

function stillRunning(key: string): DomainError {
  return new DomainError('M2M_IDEMPOTENCY_CONFLICT', 'a request with this Idempotency-Key is still being processed; retry later', { idempotencyKey: key });
}

/** Deletes stored responses past their 24 hours (run by the retention job). */
export async function purgeExpiredIdempotencyKeys(db: Db, now: Date): Promise<number> {
  return idempotencyRepo.purgeExpired(db, now);
}
