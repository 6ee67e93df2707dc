import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { addChannel, addOperator, inbound, inboxTenant, monotonicClock } from '../helpers/inbox.js';

interface Envelope {
  eventId: string;
  type: string;
  schemaVersion: string;
  tenantId: string;
  occurredAt: string;
  data: Record<string, unknown>;
}

describe('inbound messages and conversation events', () => {
  let app: TestApp;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  before(async () => {
    receiver = await startReceiver();
    app = await startTestApp({ env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' }, startWorkers: true, clock: monotonicClock() });
  });
  after(async () => {
    await app.close();
    await receiver.close();
  });

  /** Envelopes the receiver got for `tenantId`, parsed. */
  const envelopes = (tenantId: string): Envelope[] =>
    receiver.received.map((r) => JSON.parse(r.body) as Envelope).filter((e) => e.tenantId === tenantId);

  const listed = async (key: string, query = '') => {
    const res = await app.api(key, 'GET', `/conversations${query}`);
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as { conversations: Array<Record<string, unknown>>; inboxCounts: Record<string, number> };
  };

  test('201 with conversationId, messageId, contactId; one contact per phone however it is written; one conversation per channel', async () => {
    const { tenantId, key, channelId } = await inboxTenant(app, ['conversations:read']);
    const res = await app.adminRaw('POST', `/tenants/${tenantId}/inbound-messages`, {
      channelId,
      contact: { name: 'María López', phone: '+52 55 1234 5678' },
      text: 'Hola, ¿tienen habitación?',
    });
    assert.equal(res.statusCode, 201);
    const first = res.json();
    assert.deepEqual(Object.keys(first).sort(), ['contactId', 'conversationId', 'messageId']);
    for (const id of Object.values(first)) assert.equal(typeof id, 'string');

    const again = await inbound(app, tenantId, channelId, { phone: '+525512345678' }, 'Sigo aquí');
    assert.equal(again.contactId, first.contactId);
    assert.equal(again.conversationId, first.conversationId);
    assert.notEqual(again.messageId, first.messageId);

    const instagram = await addChannel(app, tenantId, 'instagram');
    const other = await inbound(app, tenantId, instagram, { phone: '+52 (55) 1234-5678' });
    assert.equal(other.contactId, first.contactId, 'same contact');
    assert.notEqual(other.conversationId, first.conversationId, 'different channel, different conversation');

    const { conversations } = await listed(key);
    assert.equal(conversations.length, 2);
    const whatsapp = conversations.find((c) => c.conversationId === first.conversationId)!;
    assert.deepEqual(whatsapp.contact, { contactId: first.contactId, name: 'María López', phone: '+525512345678' });
    assert.equal(whatsapp.channel, 'whatsapp');
    assert.equal(whatsapp.channelId, channelId);
  });

  test('a contact without a phone is found again by handle', async () => {
    const { tenantId, channelId } = await inboxTenant(app, ['conversations:read'], 'instagram');
    const first = await inbound(app, tenantId, channelId, { handle: 'surfer.joe' });
    const second = await inbound(app, tenantId, channelId, { handle: 'surfer.joe' });
    assert.equal(second.contactId, first.contactId);
    assert.equal(second.conversationId, first.conversationId);
  });

  test('invalid phone, no phone and no handle are 400; a foreign or unknown channel is 404', async () => {
    const { tenantId, channelId } = await inboxTenant(app, ['conversations:read']);
    const post = (body: unknown) => app.adminRaw('POST', `/tenants/${tenantId}/inbound-messages`, body);

    for (const phone of ['+52 123', 'not a phone', '5512345678']) {
      const bad = await post({ channelId, contact: { phone }, text: 'x' });
      assert.equal(bad.statusCode, 400, phone);
      assert.equal(bad.json().error.code, 'M2M_INVALID_REQUEST');
    }
    const nobody = await post({ channelId, contact: { name: 'Anon' }, text: 'x' });
    assert.equal(nobody.statusCode, 400);
    assert.equal(nobody.json().error.code, 'M2M_INVALID_REQUEST');
    const empty = await post({ channelId, contact: {}, text: 'x' });
    assert.equal(empty.statusCode, 400);

    const stranger = await inboxTenant(app, ['conversations:read']);
    const foreign = await post({ channelId: stranger.channelId, contact: { phone: '+525512345678' }, text: 'x' });
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.json().error.code, 'M2M_NOT_FOUND');
    assert.equal((await post({ channelId: 'chn_missing', contact: { phone: '+525512345678' }, text: 'x' })).statusCode, 404);
    const count = await app.runtime.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM conversations WHERE tenant_id = $1', [tenantId]);
    assert.equal(count[0].n, 0, 'nothing was created by the refused messages');
  });

  test('each inbound message increments unreadCount and sets needsReply', async () => {
    const { tenantId, key, channelId } = await inboxTenant(app, ['conversations:read']);
    const first = await inbound(app, tenantId, channelId, { name: 'Ana', phone: '+34 612 345 678' }, 'uno');
    let body = await listed(key);
    assert.equal(body.conversations[0].unreadCount, 1);
    assert.equal(body.conversations[0].needsReply, true);
    assert.equal(body.conversations[0].lastMessagePreview, 'uno');
    assert.deepEqual(body.inboxCounts, { total: 1, unread: 1, needsReply: 1 });

    await inbound(app, tenantId, channelId, { phone: '+34612345678' }, 'dos');
    body = await listed(key);
    assert.equal(body.conversations.length, 1);
    assert.equal(body.conversations[0].conversationId, first.conversationId);
    assert.equal(body.conversations[0].unreadCount, 2);
    assert.equal(body.conversations[0].lastMessagePreview, 'dos');
  });

  test('message.created reaches a subscribed receiver with {messageId, conversationId, direction, channel}', async () => {
    const { tenantId, key, channelId } = await inboxTenant(app, ['webhooks:write', 'conversations:read'], 'messenger');
    const sub = await app.api(key, 'POST', '/webhooks', { url: receiver.url, events: ['message.created'] });
    assert.equal(sub.statusCode, 201, sub.body);

    const message = await inbound(app, tenantId, channelId, { name: 'Lee', handle: 'lee.m' }, 'Is breakfast included?');
    const event = await eventually(async () => envelopes(tenantId).find((e) => e.data.messageId === message.messageId), 10_000, 'message.created delivery');
    assert.equal(event.type, 'message.created');
    assert.equal(event.schemaVersion, '1.0');
    assert.deepEqual(event.data, { messageId: message.messageId, conversationId: message.conversationId, direction: 'inbound', channel: 'messenger', type: 'text' });
    const delivered = receiver.received.find((r) => r.headers['x-service-event-id'] === event.eventId);
    assert.ok(delivered, 'X-Service-Event-Id names the event');
    assert.match(String(delivered.headers['x-service-signature']), /^t=\d+,v1=[0-9a-f]{64}$/);
    assert.ok(!delivered.body.includes('Is breakfast included?'), 'the event carries identifiers, not content');
  });

  test('handoffs: open, open again 409, assign, resolve; each emits conversation.handoff.updated', async () => {
    const { tenantId, key, channelId } = await inboxTenant(app, ['webhooks:write', 'conversations:read']);
    assert.equal((await app.api(key, 'POST', '/webhooks', { url: receiver.url, events: ['conversation.handoff.updated'] })).statusCode, 201);
    const { conversationId } = await inbound(app, tenantId, channelId, { phone: '+14155550123' });
    const operator = await addOperator(app, tenantId, 'Marta Ruiz');
    const handoff = (body: unknown) => app.adminRaw('POST', `/tenants/${tenantId}/conversations/${conversationId}/handoff`, body);

    const opened = await handoff({ action: 'open' });
    assert.equal(opened.statusCode, 200, opened.body);
    const h = opened.json();
    assert.match(h.handoffId, /^hof_/);
    assert.equal(h.conversationId, conversationId);
    assert.equal(h.status, 'open');
    assert.equal(h.assignedOperatorId, null);
    assert.ok(!Number.isNaN(Date.parse(h.openedAt)));
    assert.equal((await listed(key)).conversations[0].openHandoff, true);

    const twice = await handoff({ action: 'open' });
    assert.equal(twice.statusCode, 409);
    assert.equal(twice.json().error.code, 'M2M_CONFLICT');

    const assigned = await handoff({ action: 'assign', operatorId: operator.operatorId });
    assert.equal(assigned.statusCode, 200);
    assert.equal(assigned.json().handoffId, h.handoffId);
    assert.equal(assigned.json().assignedOperatorId, operator.operatorId);
    assert.equal((await handoff({ action: 'assign', operatorId: 'f'.repeat(24) })).statusCode, 404);
    assert.equal((await handoff({ action: 'close' })).statusCode, 400);

    const resolved = await handoff({ action: 'resolve' });
    assert.equal(resolved.statusCode, 200);
    assert.equal(resolved.json().status, 'resolved');
    assert.ok(!Number.isNaN(Date.parse(resolved.json().resolvedAt)));
    assert.equal((await listed(key)).conversations[0].openHandoff, false);
    assert.equal((await handoff({ action: 'resolve' })).statusCode, 409, 'nothing left to resolve');

    const stranger = await inboxTenant(app, ['conversations:read']);
    assert.equal((await app.adminRaw('POST', `/tenants/${stranger.tenantId}/conversations/${conversationId}/handoff`, { action: 'open' })).statusCode, 404);

    // The outbox holds exactly one event per change, in order ...
    const rows = await app.runtime.services.db.query<{ body: string }>(
      `SELECT body FROM webhook_events WHERE tenant_id = $1 AND type = 'conversation.handoff.updated' ORDER BY occurred_at`,
      [tenantId],
    );
    const stored = rows.map((row) => (JSON.parse(row.body) as Envelope).data);
    assert.deepEqual(stored, ['opened', 'assigned', 'resolved'].map((action) => ({ conversationId, caseId: h.handoffId, action })));
    // ... and each reaches the receiver.
    const delivered = await eventually(async () => {
      const got = envelopes(tenantId).filter((e) => e.type === 'conversation.handoff.updated');
      return got.length >= 3 && got;
    }, 10_000, 'three handoff deliveries');
    assert.deepEqual(delivered.map((e) => e.data.action).sort(), ['assigned', 'opened', 'resolved']);
    for (const e of delivered) assert.deepEqual(Object.keys(e.data).sort(), ['action', 'caseId', 'conversationId']);
  });

  test('a new handoff can be opened once the previous one is resolved', async () => {
    const { tenantId, channelId } = await inboxTenant(app, ['conversations:read']);
    const { conversationId } = await inbound(app, tenantId, channelId, { phone: '+14155550199' });
    const url = `/tenants/${tenantId}/conversations/${conversationId}/handoff`;
    const first = await app.admin<{ handoffId: string }>('POST', url, { action: 'open' });
    await app.admin('POST', url, { action: 'resolve' });
    const second = await app.admin<{ handoffId: string; status: string }>('POST', url, { action: 'open' });
    assert.notEqual(second.handoffId, first.handoffId);
    assert.equal(second.status, 'open');
  });
});
