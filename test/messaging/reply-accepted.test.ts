import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { inbound, monotonicClock } from '../helpers/inbox.js';
import { events, phone, reply, world } from '../helpers/replies.js';

// An accepted reply (decisions 6.2), with the sandbox provider and real workers: it is queued, sent, readable as an
// outbound message with its status, and its events are emitted.

let app: TestApp;

before(async () => {
  app = await startTestApp({ startWorkers: true, clock: monotonicClock() });
});
after(() => app.close());

test('a reply is queued, sent through the pipeline, and readable as an outbound message with its status', async () => {
  const w = await world(app);
  const first = await inbound(app, w.tenantId, w.channelId, { name: 'Ana', phone: phone() }, 'Can I check in early?');
  const res = await reply(app, w.key, first.conversationId, { text: 'Yes, from 11:00.' }, 'evt_same');
  assert.equal(res.statusCode, 202, res.body);
  const accepted = res.json() as { conversationId: string; messageId: string; replyId: string; requestEventId: string };
  assert.deepEqual(Object.keys(accepted).sort(), ['conversationId', 'messageId', 'replyId', 'requestEventId']);
  assert.equal(accepted.conversationId, first.conversationId);
  assert.equal(accepted.messageId, accepted.replyId);

  await eventually(async () => (await app.api(w.key, 'GET', `/message-requests/${accepted.requestEventId}/status`)).json().status === 'sent', 10_000, 'sent');
  const created = await events(app, w.tenantId, 'message.created');
  assert.deepEqual(created.map((data) => data.direction), ['inbound', 'outbound']);
  assert.deepEqual(created[0], { messageId: first.messageId, conversationId: first.conversationId, direction: 'inbound', channel: 'whatsapp', type: 'text' });
  assert.deepEqual(created[1], { messageId: accepted.messageId, conversationId: first.conversationId, direction: 'outbound', channel: 'whatsapp', type: 'text', requestEventId: accepted.requestEventId });
  const delivery = await events(app, w.tenantId, 'message.delivery.updated');
  assert.equal(delivery.length, 1);
  assert.equal(delivery[0].requestEventId, accepted.requestEventId);
  assert.equal(delivery[0].status, 'sent');

  const list = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages`)).json();
  assert.equal(list.hasMore, false);
  assert.equal(list.nextCursor, undefined);
  assert.deepEqual(list.messages.map((m: { messageId: string }) => m.messageId), [accepted.messageId, first.messageId], 'newest first');
  assert.deepEqual(list.messages[0], { ...list.messages[0], direction: 'outbound', channel: 'whatsapp', text: 'Yes, from 11:00.', requestEventId: accepted.requestEventId, status: 'sent' });
  assert.equal(list.messages[1].requestEventId, undefined);
  assert.equal(list.messages[1].status, undefined);

  // The status follows the provider's callbacks.
  await app.admin('POST', `/tenants/${w.tenantId}/message-requests/${accepted.requestEventId}/provider-status`, { status: 'delivered' });
  const one = await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages/${accepted.messageId}`);
  assert.equal(one.statusCode, 200, one.body);
  assert.equal(one.json().message.status, 'delivered');

  const conversation = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}`)).json();
  assert.equal(conversation.conversationId, first.conversationId);
  assert.equal(conversation.lastMessagePreview, 'Yes, from 11:00.');
  assert.deepEqual(conversation.contact.name, 'Ana');
});
