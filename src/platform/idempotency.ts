import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { DomainError } from '../errors.js';
import { stableStringify } from '../util/stable-json.js';
import { idempotencyRepo, type StoredUse } from './idempotency-repo.js';

/**
 * Idempotency-Key (decisions 3): one protocol for every create, start, send and reply, whose statements are
 * src/platform/sql/idempotency_claim.sql and idempotency_store.sql. A key is used on one operation, named by its
 * operationId, so one key may be used on different operations.
 */
const RETENTION_MS = 24 * 60 * 60 * 1000;

/** An Idempotency-Key is 1 to 255 characters: the one statement of the rule (REST headers, MCP arguments). */
export const IDEMPOTENCY_KEY_LENGTH = { minLength: 1, maxLength: 255 } as const;

export function isIdempotencyKey(value: unknown): value is string {
  return typeof value === 'string' && value.length >= IDEMPOTENCY_KEY_LENGTH.minLength && value.length <= IDEMPOTENCY_KEY_LENGTH.maxLength;
}

/** The caller's key on one operation: what the catalogue hands a service that runs the key itself. */
export interface IdempotencyKeyUse {
  /** The operation's operationId. */
  operation: string;
  key: string;
}

export interface IdempotentRequest extends IdempotencyKeyUse {
  tenantId: string;
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
 * response: the key is claimed first, so a crash can never leave a state change without its stored response (the
 * rollback releases both). A retry with the same request replays the stored response; a different request, or one
 * that arrives while the first is still running, gets 409 M2M_IDEMPOTENCY_CONFLICT. Errors are not stored: the
 * rollback leaves the key free for a corrected request.
 */
export async function runIdempotent<B>(db: Db, clock: Clock, req: IdempotentRequest, execute: (tx: Tx) => Promise<{ status: number; body: B }>): Promise<StoredResponse<B>> {
  const hash = requestHash(req.request);
  const ref = { tenantId: req.tenantId, operation: req.operation, key: req.key };
  return db.transaction(async (tx) => {
    const now = clock.now();
    const claim = await idempotencyRepo.claim(tx, ref, now);
    if (claim.outcome === 'running') throw stillRunning(req.key);
    if (claim.outcome === 'taken') return answerTaken<B>(req.key, hash, claim.stored);
    const result = await execute(tx);
    await idempotencyRepo.store(tx, ref, { hash, status: result.status, body: JSON.stringify(result.body), now, expiresAt: keyLifetime(now).expiresAt });
    return { ...result, replayed: false };
  });
}

/** When a key used now expires. */
export function keyLifetime(now: Date): { expiresAt: Date } {
  return { expiresAt: new Date(now.getTime() + RETENTION_MS) };
}

/** The answer to a request whose key holds an unexpired earlier use: its stored response for the same request, else 409. */
export function answerTaken<B>(key: string, hash: string, stored: StoredUse): StoredResponse<B> {
  if (stored.request_hash !== hash) {
    throw new DomainError('M2M_IDEMPOTENCY_CONFLICT', 'Idempotency-Key was already used with a different request', { idempotencyKey: key });
  }
  // The JSON of a B: stored by runIdempotent or conversation_replies for this operation.
  const body: B = JSON.parse(stored.response_body);
  return { status: stored.response_status, body, replayed: true };
}

function stillRunning(key: string): DomainError {
  return new DomainError('M2M_IDEMPOTENCY_CONFLICT', 'a request with this Idempotency-Key is still being processed; retry later', { idempotencyKey: key });
}

/** Deletes stored responses past their 24 hours (run by the retention job). */
export async function purgeExpiredIdempotencyKeys(db: Db, now: Date): Promise<number> {
  return idempotencyRepo.purgeExpired(db, now);
}
