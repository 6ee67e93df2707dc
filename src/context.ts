import type { Db, Tx } from './db/driver.js';

/**
 * Who acts: an integration's API key (with the scopes it holds), a dashboard operator, the admin API, or
 * the system itself (workers, schedules). One type for every service and every audit record.
 */
export type Actor =
  | { type: 'api_key'; id: string; name: string; scopes: readonly string[] }
  | { type: 'operator'; id: string; name: string }
  | { type: 'admin'; id: null; name: string }
  | { type: 'system'; id: null; name: string };

/** What every service method takes first: the tenant (only ever from the credential), who acts, and the request. */
export interface Ctx {
  tenantId: string;
  actor: Actor;
  requestId: string;
  /** Set when the catalogue runs a create under an Idempotency-Key: the service writes in this transaction, beside the stored response. */
  tx?: Tx;
}

/** Runs `work` in the context's transaction when it has one, else in a new one. */
export function transactionOf<T>(db: Db, ctx: Ctx, work: (tx: Tx) => Promise<T>): Promise<T> {
  return ctx.tx ? work(ctx.tx) : db.transaction(work);
}

export const systemActor: Actor = { type: 'system', id: null, name: 'system' };
export const adminActor: Actor = { type: 'admin', id: null, name: 'Admin API' };

export function adminCtx(tenantId: string, requestId: string): Ctx {
  return { tenantId, actor: adminActor, requestId };
}

export function systemCtx(tenantId: string, requestId = 'system'): Ctx {
  return { tenantId, actor: systemActor, requestId };
}

/** The API key acting, or undefined for operators, the admin API and the system. */
export function actingKey(actor: Actor): { id: string; name: string; scopes: readonly string[] } | undefined {
  return actor.type === 'api_key' ? actor : undefined;
}
