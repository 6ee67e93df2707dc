import type { Principal } from '../auth/keys.js';

/** Who changed a conversation: an integration's API key, a dashboard operator, or the system. */
export type Actor =
  | { type: 'api_key'; id: string; name: string }
  | { type: 'operator'; id: string; name: string }
  | { type: 'system'; id: null; name: string };

export function keyActor(principal: Principal): Actor {
  return { type: 'api_key', id: principal.apiKeyId, name: principal.apiKeyName };
}

export const systemActor: Actor = { type: 'system', id: null, name: 'system' };

export const ACTIVITY_CHANNEL = 'conversation-activity';
