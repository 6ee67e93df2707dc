import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { inbound, monotonicClock } from '../helpers/inbox.js';
import { errorOf, HOUR, phone, reply, world } from '../helpers/replies.js';

// Conversation content: GET conversation, its messages, one message, and inbound history imported with receivedAt.
// The reply path (POST /conversations/{conversationId}/messages) is tested in test/messaging/reply-*.test.ts.

let app: TestApp;
let seq = 0;

before(async () => {
  app = await startTestApp({ startWorkers: true, clock: monotonicClock() });
});
after(() => app.close());

test('messages page newest first with a cursor bound to the direction filter', async () => {
  const w = await world(app, 'webchat');
  const handle = `pager-${++seq}`;
  const first = await inbound(app, w.tenantId, w.channelId, { handle }, 'm1');
  const ids = [first.messageId];
  for (let n = 2; n <= 5; n++) {
    if (n % 2 === 0) {
      const res = await reply(app, w.key, first.conversationId, { text: `r${n}` });
      ids.push(res.json().messageId);
    } else {
      ids.push((await inbound(app, w.tenantId, w.channelId, { handle }, `m${n}`)).messageId);
    }
  }
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const res = await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.statusCode, 200, res.body);
    const page = res.json();
    seen.push(...page.messages.map((m: { messageId: string }) => m.messageId));
    assert.equal(page.hasMore, page.nextCursor !== undefined);
    cursor = page.nextCursor;
    if (cursor) errorOf(await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages?limit=2&direction=inbound&cursor=${encodeURIComponent(cursor)}`), 400, 'M2M_INVALID_CURSOR');
  } while (cursor);
  assert.deepEqual(seen, [...ids].reverse());

  const inboundOnly = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages?direction=inbound`)).json();
  assert.deepEqual(inboundOnly.messages.map((m: { text: string }) => m.text), ['m5', 'm3', 'm1']);
  const outboundOnly = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages?direction=outbound`)).json();
  assert.deepEqual(outboundOnly.messages.map((m: { text: string }) => m.text), ['r4', 'r2']);
  errorOf(await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages?limit=101`), 400, 'M2M_INVALID_REQUEST');
  errorOf(await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages?direction=system`), 400, 'M2M_INVALID_REQUEST');
});

test('unknown and foreign conversations and messages are 404', async () => {
  const w = await world(app, 'webchat');
  const other = await world(app, 'webchat');
  const mine = await inbound(app, w.tenantId, w.channelId, { handle: `a-${++seq}` });
  const mineToo = await inbound(app, w.tenantId, w.channelId, { handle: `b-${++seq}` });
  const theirs = await inbound(app, other.tenantId, other.channelId, { handle: `c-${++seq}` });
  for (const url of [
    `/conversations/${theirs.conversationId}`,
    `/conversations/nope`,
    `/conversations/${theirs.conversationId}/messages`,
    `/conversations/${theirs.conversationId}/messages/${theirs.messageId}`,
    `/conversations/${mine.conversationId}/messages/${theirs.messageId}`,
    `/conversations/${mine.conversationId}/messages/${mineToo.messageId}`,
    // A foreign conversation is 404 whatever else is wrong with the request.
    `/conversations/${theirs.conversationId}/messages?cursor=not-a-cursor`,
  ]) {
    errorOf(await app.api(w.key, 'GET', url), 404, 'M2M_NOT_FOUND');
  }
  errorOf(await app.api(w.key, 'GET', `/conversations/${mine.conversationId}/messages?cursor=not-a-cursor`), 400, 'M2M_INVALID_CURSOR');
  // A conversation of mine with no message matching the filter: an empty page, not a 404.
  const none = await app.api(w.key, 'GET', `/conversations/${mine.conversationId}/messages?direction=outbound`);
  assert.equal(none.statusCode, 200, none.body);
  assert.deepEqual(none.json(), { messages: [], hasMore: false });
});

test('inbound receivedAt imports history: message time, last activity and the window use it; the future is refused', async () => {
  const w = await world(app, 'whatsapp');
  const guest = phone();
  const at = new Date(Date.now() - 2 * HOUR);
  const first = await app.admin<{ conversationId: string; messageId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, { channelId: w.channelId, contact: { phone: guest }, text: 'two hours ago', receivedAt: at.toISOString() });
  const conversation = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}`)).json();
  assert.equal(conversation.lastMessageAt, at.toISOString());
  assert.equal(conversation.needsReply, true);
  const message = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages/${first.messageId}`)).json().message;
  assert.equal(message.createdAt, at.toISOString());

  // An older import lands in its place in history without moving the last activity.
  const older = new Date(Date.now() - 3 * HOUR);
  await app.admin('POST', `/tenants/${w.tenantId}/inbound-messages`, { channelId: w.channelId, contact: { phone: guest }, text: 'three hours ago', receivedAt: older.toISOString() });
  const after = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}`)).json();
  assert.equal(after.lastMessageAt, at.toISOString());
  assert.equal(after.lastMessagePreview, 'two hours ago');
  const texts = (await app.api(w.key, 'GET', `/conversations/${first.conversationId}/messages`)).json().messages.map((m: { text: string }) => m.text);
  assert.deepEqual(texts, ['two hours ago', 'three hours ago']);

  const future = await app.adminRaw('POST', `/tenants/${w.tenantId}/inbound-messages`, { channelId: w.channelId, contact: { phone: guest }, text: 'x', receivedAt: new Date(Date.now() + 60_000).toISOString() });
  errorOf(future, 400, 'M2M_INVALID_REQUEST');
  const malformed = await app.adminRaw('POST', `/tenants/${w.tenantId}/inbound-messages`, { channelId: w.channelId, contact: { phone: guest }, text: 'x', receivedAt: 'yesterday' });
  errorOf(malformed, 400, 'M2M_INVALID_REQUEST');
});
