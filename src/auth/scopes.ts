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
] as const;

export type Scope = (typeof ALL_SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (ALL_SCOPES as readonly string[]).includes(value);
}

/** A `:write` scope implies the matching `:read` scope. */
export function hasScope(granted: readonly string[], required: string): boolean {
  if (granted.includes(required)) return true;
  return required.endsWith(':read') && granted.includes(`${required.slice(0, -':read'.length)}:write`);
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
