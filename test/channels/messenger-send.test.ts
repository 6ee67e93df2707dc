import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { messengerTextMessage } from '../helpers/fake-graph.js';
import { eventually } from '../helpers/app.js';
import { startMetaWorld, type MetaWorld, type MetaWorldHarness } from '../helpers/meta-world.js';

// Replies on Messenger through the Send API of the fake Graph API: the request as Meta documents it, the 24-hour
// window refused up front, Graph errors mapped to meta_<code>, a 429 retried with backoff and sent once.

let h: MetaWorldHarness;

before(async () => {
  h = await startMetaWorld({ SEND_MAX_ATTEMPTS: '4' });
});
after(async () => {
  await h.close();
});

/** A guest wrote `agoMs` ago; its profile lookup done, so the next Graph call is the reply's. */
async function conversation(agoMs = 5_000): Promise<MetaWorld & { conversationId: string }> {
  const w = await h.world('messenger');
  h.graph.setProfile(w.guest, { name: 'Ana Martínez' });
  await h.post(messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: `m_in_${w.guest}`, timestamp: Date.now() - agoMs, text: 'Hola 👋' }));
  await h.allProcessed();
  await eventually(async () => (await h.contactsOf(w))[0]?.name === 'Ana Martínez', 30_000, 'the profile name');
  return { ...w, conversationId: await h.onlyConversation(w) };
}

const sends = (w: MetaWorld) => h.graph.sent(w.accountId, 'messages');

test('a reply goes to POST /{page-id}/messages as Meta documents it (RESPONSE, PSID, page token) and is sent once', async () => {
  const c = await conversation();
  const text = 'Your room is ready 🛏️ — check-in from 3pm';
  const res = await h.reply(c, c.conversationId, text);
  assert.equal(res.statusCode, 202, res.body);
  const { requestEventId, messageId } = res.json() as { requestEventId: string; messageId: string };
  const status = await h.finalStatus(c, requestEventId);
  assert.equal(status.status, 'sent');
  const [sent] = sends(c);
  assert.deepEqual(sent.json, { recipient: { id: c.guest }, messaging_type: 'RESPONSE', message: { text } });
  assert.equal(sent.headers.authorization, `Bearer ${c.token}`);
  assert.match(sent.path, /^\/v23\.0\/[0-9]+\/messages$/);
  assert.equal(sends(c).length, 1);
  const outbound = (await h.messagesOf(c, c.conversationId)).find((m) => m.messageId === messageId);
  assert.deepEqual({ direction: outbound?.direction, source: outbound?.source, status: outbound?.status }, { direction: 'outbound', source: 'api', status: 'sent' });
  const channel = await h.app.api(c.key, 'GET', `/channels/${c.channelId}`);
  const connection = (channel.json() as { channel: { connection: { status: string; lastOutboundAt?: string; lastInboundAt?: string } } }).channel.connection;
  assert.equal(connection.status, 'connected');
  assert.ok(connection.lastOutboundAt && connection.lastInboundAt);
});

test('outside the 24-hour window a reply is refused up front (409 outside_customer_service_window) and nothing is sent', async () => {
  const c = await conversation(25 * 3600_000);
  const res = await h.reply(c, c.conversationId, 'Are you still there?');
  assert.equal(res.statusCode, 409, res.body);
  const details = (res.json() as { error: { details: { reason: string; channel: string; windowHours: number } } }).error.details;
  assert.deepEqual({ reason: details.reason, channel: details.channel, windowHours: details.windowHours }, { reason: 'outside_customer_service_window', channel: 'messenger', windowHours: 24 });
  assert.equal(sends(c).length, 0);
});

test('a Graph refusal is mapped to meta_<code> and not retried; the window subcode (10/2018278) closes the window', async () => {
  const c = await conversation();
  h.graph.failNext(1, { status: 400, code: 100, message: '(#100) No matching user found' });
  const refused = await h.reply(c, c.conversationId, 'Hello');
  const status = await h.finalStatus(c, (refused.json() as { requestEventId: string }).requestEventId);
  assert.deepEqual({ status: status.status, code: status.error?.code }, { status: 'failed', code: 'meta_100' });
  assert.equal(sends(c).length, 1);

  h.graph.failNext(1, { status: 400, code: 10, subcode: 2018278, message: '(#10) This message is sent outside of allowed window.' });
  const late = await h.reply(c, c.conversationId, 'Hello again');
  const lateStatus = await h.finalStatus(c, (late.json() as { requestEventId: string }).requestEventId);
  assert.equal(lateStatus.error?.code, 'meta_10');
  const next = await h.reply(c, c.conversationId, 'Anyone?');
  assert.equal(next.statusCode, 409, next.body);
  assert.equal((next.json() as { error: { details: { reason: string } } }).error.details.reason, 'outside_customer_service_window');
});

test('a 429 (rate limit) is retried with backoff and the message goes out once', async () => {
  const c = await conversation();
  h.graph.failNext(1, { status: 429, code: 613, message: '(#613) Calls to this api have exceeded the rate limit.' });
  const res = await h.reply(c, c.conversationId, 'Breakfast is served until 11 🥐');
  const status = await h.finalStatus(c, (res.json() as { requestEventId: string }).requestEventId);
  assert.equal(status.status, 'sent');
  assert.deepEqual(sends(c).map((r) => r.status), [429, 200]);
  assert.deepEqual(sends(c)[1].json, { recipient: { id: c.guest }, messaging_type: 'RESPONSE', message: { text: 'Breakfast is served until 11 🥐' } });
  const [row] = await h.db.query<{ dispatch_attempts: number; provider_message_id: string }>('SELECT dispatch_attempts, provider_message_id FROM message_requests WHERE conversation_id = $1', [c.conversationId]);
  assert.equal(row.dispatch_attempts, 2);
  assert.ok(row.provider_message_id.startsWith('m_'));
});

test('a refused page token (190) fails the send as meta_190 and marks the connection failing', async () => {
  const c = await conversation();
  h.graph.failNext(1, { status: 401, code: 190, message: 'Error validating access token: Session has expired' });
  const res = await h.reply(c, c.conversationId, 'Hola');
  const status = await h.finalStatus(c, (res.json() as { requestEventId: string }).requestEventId);
  assert.equal(status.error?.code, 'meta_190');
  const channel = await h.app.api(c.key, 'GET', `/channels/${c.channelId}`);
  const connection = (channel.json() as { channel: { connection: { status: string; lastError?: { code: string } } } }).channel.connection;
  assert.deepEqual({ status: connection.status, code: connection.lastError?.code }, { status: 'failing', code: 'meta_190' });
});
