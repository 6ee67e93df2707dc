import type { Ctx } from '../context.js';
import { runIdempotent } from '../platform/idempotency.js';
import type { Clock } from '../clock.js';
import type { Db } from '../db/driver.js';
import { decryptSecret, encryptSecret, type Keyring } from '../secrets.js';
import { Replayable, WithStatus, type Operation, type SuccessStatus } from './define.js';

/** What running an operation takes besides its own services: the database, clock and keyring of Idempotency-Key. */
export interface ExecuteServices {
  db: Db;
  clock: Clock;
  keyring: Keyring;
}

export interface Executed {
  body: unknown;
  replayed: boolean;
  /** Set when the handler answered another of its declared statuses than the operation's default one. */
  status?: SuccessStatus;
}

/**
 * Runs one operation for any surface (REST, MCP): `input` is validated already; `idempotencyKey` is the
 * caller's key (header or tool field). Creates run under the key in the transaction of their writes.
 */
export async function executeOperation<S>(services: S & ExecuteServices, operation: Operation<S>, ctx: Ctx, input: Record<string, unknown>, idempotencyKey: string | undefined): Promise<Executed> {
  if (operation.idempotency?.by === 'create' && idempotencyKey !== undefined) {
    // The stored answer is sealed: a create's response may hold a secret (a webhook's signing secret).
    const key = services.keyring.encryptionKey;
    const stored = await runIdempotent(services.db, services.clock, { tenantId: ctx.tenantId, operation: operation.operationId, key: idempotencyKey, request: input }, async (tx) => ({
      status: operation.status,
      body: { sealed: encryptSecret(key, JSON.stringify(await operation.run(services, { ...ctx, tx }, input))) },
    }));
    return { body: JSON.parse(decryptSecret(key, stored.body.sealed)), replayed: stored.replayed };
  }
  // A service that runs the key itself gets it with the operation it is used on: keys are named by operationId.
  const serviceInput = operation.idempotency?.by === 'service' && idempotencyKey !== undefined ? { ...input, idempotency: { operation: operation.operationId, key: idempotencyKey } } : input;
  const result = await operation.run(services, ctx, serviceInput);
  if (result instanceof WithStatus) return { body: result.body, replayed: false, status: result.status };
  return result instanceof Replayable ? { body: result.body, replayed: result.replayed } : { body: result, replayed: false };
}
