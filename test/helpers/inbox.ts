import type { Clock } from '../../src/clock.js';
import type { TestApp } from './app.js';

/** Real time, but never the same millisecond twice: "newest activity first" is then deterministic. */
export function monotonicClock(): Clock {
  let last = 0;
  return {
    now() {
      last = Math.max(Date.now(), last + 1);
      return new Date(last);
    },
  };
}

export interface Inbound {
  conversationId: string;
  messageId: string;
  contactId: string;
}

/** A tenant with one key and one channel of `kind`. */
export async function inboxTenant(app: TestApp, scopes: string[], kind = 'whatsapp') {
  const tenant = await app.tenantWithKey(scopes);
  const channel = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind, name: `${kind} line` });
  return { ...tenant, channelId: channel.channelId };
}

export async function addChannel(app: TestApp, tenantId: string, kind: string): Promise<string> {
  return (await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind, name: `${kind} line` })).channelId;
}

/** A guest's message arriving through the admin route. */
export function inbound(app: TestApp, tenantId: string, channelId: string, contact: { name?: string; phone?: string; handle?: string }, text = 'Hola') {
  return app.admin<Inbound>('POST', `/tenants/${tenantId}/inbound-messages`, { channelId, contact, text });
}

export async function addOperator(app: TestApp, tenantId: string, displayName: string, email = `${displayName.toLowerCase().replace(/\W/g, '')}@example.com`) {
  return app.admin<{ operatorId: string; displayName: string; email: string; active: boolean }>('POST', `/tenants/${tenantId}/operators`, { displayName, email });
}

/** A well-formed operator id that exists nowhere. */
export const UNKNOWN_OPERATOR = 'f'.repeat(24);
