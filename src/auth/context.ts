import type { Actor, Ctx } from '../context.js';
import type { Principal } from './keys.js';

/** The API key acting, with the scopes it holds. */
export function keyActor(principal: Principal): Actor {
  return { type: 'api_key', id: principal.apiKeyId, name: principal.apiKeyName, scopes: principal.scopes };
}

/** The context of a request made with an API key: the tenant is the key's, never the caller's say. */
export function keyCtx(principal: Principal, requestId: string): Ctx {
  return { tenantId: principal.tenantId, actor: keyActor(principal), requestId };
}
