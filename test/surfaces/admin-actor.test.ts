import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { ADMIN_TOKEN, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { addOperator, inbound, inboxTenant } from '../helpers/inbox.js';

// What the admin API changes is recorded as done by the admin, not by "system": the activity row (what the
// dashboard's stream shows). The conversation.handoff.updated event's payload carries no actor (its shape is
// the contract), so the activity record is where the actor lives.

let app: TestApp;
let base: string;

before(async () => {
  app = await startTestApp();
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.runtime.app.server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}/admin/v1`;
});
after(async () => {
  app.runtime.app.server.closeAllConnections();
  await app.close();
});

/** The activity events of a tenant's stream from its first one on (Last-Event-ID 0), once `count` have arrived. */
async function streamedActivity(tenantId: string, count: number): Promise<{ event: string; actor: unknown }[]> {
  const controller = new AbortController();
  const res = await fetch(`${base}/tenants/${tenantId}/conversations/stream`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'last-event-id': '0' },
    signal: controller.signal,
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const events = () =>
    text
      .split('\n\n')
      .filter((block) => block.includes('\ndata: ') || block.startsWith('data: '))
      .map((block) => {
        const event = block.split('\n').find((line) => line.startsWith('event: '))?.slice(7) ?? '';
        const data: { actor: unknown } = JSON.parse(block.split('\n').find((line) => line.startsWith('data: '))!.slice(6));
        return { event, actor: data.actor };
      });
  try {
    while (events().length < count) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    return events();
  } finally {
    controller.abort();
  }
}

test('an owner change and a handoff made through the admin API record the admin as actor', async () => {
  const { tenantId, channelId } = await inboxTenant(app, ['conversations:read']);
  const { conversationId } = await inbound(app, tenantId, channelId, { name: 'Ana', phone: '+14155550199' });
  const operator = await addOperator(app, tenantId, 'Olga');

  const owner = await app.adminRaw('PATCH', `/tenants/${tenantId}/conversations/${conversationId}`, { ownerOperatorId: operator.operatorId });
  assert.equal(owner.statusCode, 200);
  const opened = await app.adminRaw('POST', `/tenants/${tenantId}/conversations/${conversationId}/handoff`, { action: 'open' });
  assert.equal(opened.statusCode, 200);
  const assigned = await app.adminRaw('POST', `/tenants/${tenantId}/conversations/${conversationId}/handoff`, { action: 'assign', operatorId: operator.operatorId });
  assert.equal(assigned.statusCode, 200);

  const stored = await app.runtime.services.db.query<{ kind: string; actor_type: string; actor_id: string | null }>(
    `SELECT kind, actor_type, actor_id FROM conversation_activity WHERE tenant_id = $1 AND conversation_id = $2 AND kind <> 'message.inbound' ORDER BY id`,
    [tenantId, conversationId],
  );
  assert.deepEqual(stored, [
    { kind: 'conversation.owner_changed', actor_type: 'admin', actor_id: null },
    { kind: 'handoff.opened', actor_type: 'admin', actor_id: null },
    { kind: 'handoff.assigned', actor_type: 'admin', actor_id: null },
  ]);

  const streamed = await eventually(async () => {
    const events = await streamedActivity(tenantId, 4);
    return events.length >= 4 && events;
  });
  assert.deepEqual(
    streamed.filter((e) => e.event !== 'message.inbound'),
    ['conversation.owner_changed', 'handoff.opened', 'handoff.assigned'].map((event) => ({ event, actor: { type: 'admin', id: null } })),
  );
});
