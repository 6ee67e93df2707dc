import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { finalStatus, reason, send, startKinds, world, type KindsHarness } from '../helpers/kinds-world.js';

// Reactions (decisions 7.2): POST /conversations/{id}/messages/{messageId}/reactions queues a reaction that the send
// job sends as a `reaction` request (WhatsApp: type reaction, '' removes it), under the reply's window and rules.

let h: KindsHarness;
before(async () => {
  h = await startKinds();
});
after(async () => {
  await h.close();
});

interface Accepted {
  conversationId: string;
  messageId: string;
  requestEventId: string;
}

test('a reaction is sent to the guest\'s message, then removed with an empty emoji', async () => {
  const w = await world(h);
  const url = `/conversations/${w.conversationId}/messages/${w.inboundId}/reactions`;
  const added = await send(h, w.key, url, { emoji: '👍🏽' });
  assert.equal(added.statusCode, 202, added.body);
  const accepted = added.json() as Accepted;
  assert.equal(accepted.conversationId, w.conversationId);
  assert.equal(accepted.messageId, w.inboundId);
  assert.equal((await finalStatus(h, w.key, accepted.requestEventId)).status, 'sent');
  const removed = await send(h, w.key, url, { emoji: '' });
  assert.equal(removed.statusCode, 202, removed.body);
  assert.equal((await finalStatus(h, w.key, (removed.json() as Accepted).requestEventId)).status, 'sent');

  const bodies = h.graph.sent(w.phoneNumberId, 'messages').map((r) => r.json);
  const base = { messaging_product: 'whatsapp', recipient_type: 'individual', to: w.guest, type: 'reaction' };
  assert.deepEqual(bodies, [
    { ...base, reaction: { message_id: w.inboundWamid, emoji: '👍🏽' } },
    { ...base, reaction: { message_id: w.inboundWamid, emoji: '' } },
  ]);
  const list = (await h.app.api(w.key, 'GET', `/conversations/${w.conversationId}/messages?direction=outbound`)).json() as { messages: Array<{ type: string; reaction?: { emoji: string; targetMessageId?: string } }> };
  assert.deepEqual(list.messages.map((m) => [m.type, m.reaction]), [
    ['reaction', { emoji: '', targetMessageId: w.inboundId }],
    ['reaction', { emoji: '👍🏽', targetMessageId: w.inboundId }],
  ]);
});

test('one emoji only: text, two emoji or a letter are 400 naming body.emoji; ZWJ sequences and flags count as one', async () => {
  const w = await world(h);
  const url = `/conversations/${w.conversationId}/messages/${w.inboundId}/reactions`;
  for (const emoji of ['ok', '👍👍', 'a', ' ']) {
    const res = await send(h, w.key, url, { emoji });
    assert.equal(res.statusCode, 400, `${emoji}: ${res.body}`);
    assert.equal((res.json() as { error: { details: { issues: Array<{ path: string }> } } }).error.details.issues[0].path, 'body.emoji');
  }
  for (const emoji of ['👨‍👩‍👧', '🇲🇽', '❤️', '❤']) assert.equal((await send(h, w.key, url, { emoji })).statusCode, 202, emoji);
});

test('an unknown message is 404; outside the window 409 outside_customer_service_window, nothing written', async () => {
  const w = await world(h);
  assert.equal((await send(h, w.key, `/conversations/${w.conversationId}/messages/msg_missing/reactions`, { emoji: '👍' })).statusCode, 404);
  const db = h.app.runtime.services.db;
  await db.query(`UPDATE conversations SET last_inbound_at = now() - interval '25 hours' WHERE id = $1`, [w.conversationId]);
  const res = await send(h, w.key, `/conversations/${w.conversationId}/messages/${w.inboundId}/reactions`, { emoji: '👍' });
  assert.equal(res.statusCode, 409, res.body);
  assert.equal(reason(res), 'outside_customer_service_window');
  assert.equal((await db.query(`SELECT 1 FROM messages WHERE conversation_id = $1 AND direction = 'outbound'`, [w.conversationId])).length, 0);
});

test('a reaction to a contact who opted out is 409 recipient_opted_out, nothing written', async () => {
  const w = await world(h);
  const db = h.app.runtime.services.db;
  const [{ contact_id: contactId }] = await db.query<{ contact_id: string }>('SELECT contact_id FROM conversations WHERE id = $1', [w.conversationId]);
  await h.app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${contactId}`, { optedOut: true });
  const res = await send(h, w.key, `/conversations/${w.conversationId}/messages/${w.inboundId}/reactions`, { emoji: '👍' });
  assert.equal(res.statusCode, 409, res.body);
  assert.equal(reason(res), 'recipient_opted_out');
  assert.equal((await db.query(`SELECT 1 FROM messages WHERE conversation_id = $1 AND direction = 'outbound'`, [w.conversationId])).length, 0);
});
