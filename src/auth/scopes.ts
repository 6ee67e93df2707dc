/** Every permission scope a key can hold. New scopes are never granted to existing keys automatically. */
export const ALL_SCOPES = [
  'knowledge:read',
  'knowledge:write',
  'conversations:read',
  'conversations:write',
  'conversations:assignment:read',
  'conversations:triage:write',
  'conversations:reviews:write',
  'crm:followups:read',
  'crm:followups:write',
  'crm:automation:read',
  'crm:automation:write',
  'crm:sales:read',
  'messages:read',
  'reservations:read',
  'reservations:write',
  'webhooks:read',
  'webhooks:write',
  'channels:read',
  'properties:read',
  'contacts:read',
  'contacts:write',
  'conversations:handoffs:write',
] as const;

export type Scope = (typeof ALL_SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (ALL_SCOPES as readonly string[]).includes(value);
}

/** The `:write` scope that implies a `:read` scope; undefined for any other scope. */
function impliedBy(required: string): string | undefined {
  return required.endsWith(':read') ? `${required.slice(0, -':read'.length)}:write` : undefined;
}

/**
 * The scopes any one of which grants `required`: itself and, for a `:read` scope, the matching `:write` scope
 * (a write scope implies its read scope). SQL receives them as parameters (webhook_emit's fan-out, `api_key_grants`: src/auth/sql/api_key_grants.sql).
 */
export function grantingScopes(required: string): [string] | [string, string] {
  const write = impliedBy(required);
  return write === undefined ? [required] : [required, write];
}

export function hasScope(granted: readonly string[], required: string): boolean {
  if (granted.includes(required)) return true;
  const write = impliedBy(required);
  return write !== undefined && granted.includes(write);
}

export function missingScopes(granted: readonly string[], required: readonly string[]): string[] {
  return required.filter((scope) => !hasScope(granted, scope));
}

/**
 * How an operation's scopes are required: `all` of them, or `any` one (reads whose results are filtered by
 * scope, such as the event feed). Returns the scopes to report as missing; empty when the key may call it.
 */
export type ScopeMode = 'all' | 'any';
export function refusedScopes(granted: readonly string[], required: readonly string[], mode: ScopeMode = 'all'): string[] {
  if (mode === 'all') return missingScopes(granted, required);
  return required.length === 0 || required.some((scope) => hasScope(granted, scope)) ? [] : [...required];
}
