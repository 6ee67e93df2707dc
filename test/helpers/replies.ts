import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import type { TestApp } from './app.js';

// Shared by the tests of the reply path (POST /conversations/{conversationId}/messages) and of conversation content:
// a tenant with a channel, a reply, the error of an answer, the events emitted and what was written.

export const REPLY_SCOPES = ['conversations:read', 'conversations:write', 'messages:read'];
export const HOUR = 3_600_000;

let seq = 0;

/** A WhatsApp number no other call of this process has used. */
export const phone = () => `+5255${30_000_000 + ++seq}`;

/** A tenant with a key holding REPLY_SCOPES and one channel of `kind`. */
export async function world(app: TestApp, kind = 'whatsapp', options: { available?: boolean } = {}) {
  const tenant = await app.tenantWithKey(REPLY_SCOPES);
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind, name: kind, ...options });
  return { ...tenant, channelId };
}

/** A reply under `idempotencyKey` (a fresh key unless given; none when null). */
export function reply(app: TestApp, key: string, conversationId: string, body: unknown, idempotencyKey: string | null = `k-${++seq}`) {
  return app.api(key, 'POST', `/conversations/${conversationId}/messages`, body, idempotencyKey === null ? {} : { 'idempotency-key': idempotencyKey });
}

/** Asserts an error answer of `status` and `code` carrying a request id; returns its details. */
export function errorOf(res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as { error: { code: string; details: Record<string, unknown> } };
  assert.equal(body.error.code, code);
  assert.ok(res.headers['x-request-id']);
  return body.error.details;
}

/** The data of the tenant's webhook events of `type`, oldest first. */
export async function events(app: TestApp, tenantId: string, type: string): Promise<Array<Record<string, unknown>>> {
  const rows = await app.runtime.services.db.query<{ body: string }>('SELECT body FROM webhook_events WHERE tenant_id = $1 AND type = $2 ORDER BY created_at, id', [tenantId, type]);
  return rows.map((row) => (JSON.parse(row.body) as { data: Record<string, unknown> }).data);
}

/** How many messages, message requests, webhook events and idempotency keys the tenant has. */
export async function written(app: TestApp, tenantId: string) {
  const count = async (sql: string) => (await app.runtime.services.db.query<{ n: number }>(sql, [tenantId]))[0].n;
  return {
    messages: await count('SELECT count(*)::int AS n FROM messages WHERE tenant_id = $1'),
    requests: await count('SELECT count(*)::int AS n FROM message_requests WHERE tenant_id = $1'),
    events: await count('SELECT count(*)::int AS n FROM webhook_events WHERE tenant_id = $1'),
    keys: await count('SELECT count(*)::int AS n FROM idempotency_keys WHERE tenant_id = $1'),
  };
}
