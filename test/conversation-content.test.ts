import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { eventually, startTestApp, type TestApp } from './helpers/app.js';
import { inbound, monotonicClock } from './helpers/inbox.js';

// Conversation content (GET conversation, its messages, one message) and the plain-text reply of
// decisions 6.2, with the sandbox provider and real workers: a reply is queued, sent, and its events emitted.

const SCOPES = ['conversations:read', 'conversations:write', 'messages:read'];
const HOUR = 3_600_000;
let app: TestApp;
let seq = 0;
const phone = () => `+5255${30_000_000 + ++seq}`;

before(async () => {
  app = await startTestApp({ startWorkers: true, clock: monotonicClock() });
});
after(() => app.close());

async function world(kind = 'whatsapp', options: { available?: boolean } = {}) {
  const tenant = await app.tenantWithKey(SCOPES);
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind, name: kind, ...options });
  return { ...tenant, channelId };
}

function reply(key: string, conversationId: string, body: unknown, idempotencyKey: string | null = `k-${++seq}`) {
  return app.api(key, 'POST', `/conversations/${conversationId}/messages`, body, idempotencyKey === null ? {} : { 'idempotency-key': idempotencyKey });
}

function errorOf(res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as { error: { code: string; details: Record<string, unknown> } };
  assert.equal(body.error.code, code);
  assert.ok(res.headers['x-request-id']);
  return body.error.details;
}

async function events(tenantId: string, type: string): Promise<Array<Record<string, unknown>>> {
  const rows = await app.runtime.services.db.query<{ body: string }>('SELECT body FROM webhook_events WHERE tenant_id = $1 AND type = $2 ORDER BY created_at, id', [tenantId, type]);
  return rows.map((row) => (JSON.parse(row.body) as { data: Record<string, unknown> }).data);
}

async function written(tenantId: string) {
  const count = async (sql: string) => (await app.runtime.services.db.query<{ n: number }>(sql, [tenantId]))[0].n;
  return {
    messages: await count('SELECT count(*)::int AS n FROM messages WHERE tenant_id = $1'),
    requests: await count('SELECT count(*)::int AS n FROM message_requests WHERE tenant_id = $1'),
    events: await count('SELECT count(*)::int AS n FROM webhook_events WHERE tenant_id = $1'),
    keys: await count('SELECT count(*)::int AS n FROM idempotency_keys WHERE tenant_id = $1'),
  };
}

test('a reply is queued, sent through the pipeline, and readable as an outbound message with its status', async () => {
  const w = await world();
  const first = await inbound(app, w.tenantId, w.channelId, { name: 'Ana', phone: phone() }, 'Can I check in early?');
  const res = await reply(w.key, first.conversationId, { text: 'Yes, from 11:00.' }, 'evt_same');
  assert.equal(res.statusCode, 202, res.body);
  const accepted = res.json() as { conversationId: string; messageId: string; replyId: string; requestEventId: string };
  assert.deepEqual(Object.keys(accepted).sort(), ['conversationId', 'messageId', 'replyId', 'requestEventId']);
  assert.equal(accepted.conversationId, first.conversationId);
  assert.equal(accepted.messageId, accepted.replyId);

  await eventually(async () => (await app.api(w.key, 'GET', `/message-requests/${accepted.requestEventId}/status`)).json().status === 'sent', 10_000, 'sent');
  const created = await events(w.tenantId, 'message.created');
  assert.deepEqual(created.map((data) => data.direction), ['inbound', 'outbound']);
  assert.deepEqual(created[0], { messageId: first.messageId, conversationId: first.conversationId, direction: 'inbound', channel: 'whatsapp', type: 'text' });
  assert.deepEqual(created[1], { messageId: accepted.messageId, conversationId: first.conversationId, direction: 'outbound', channel: 'whatsapp', type: 'text', requestEventId: accepted.requestEventId });
  const delivery = await events(w.tenantId, 'message.delivery.updated');
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

  // Replay: same key and body → the same 202, nothing new; another body under the key → 409.
  const before = await written(w.tenantId);
  const replay = await reply(w.key, first.conversationId, { text: 'Yes, from 11:00.' }, 'evt_same');
  assert.equal(replay.statusCode, 202);
  assert.equal(replay.headers['idempotent-replayed'], 'true');
  assert.deepEqual(replay.json(), accepted);
  errorOf(await reply(w.key, first.conversationId, { text: 'Something else' }, 'evt_same'), 409, 'M2M_IDEMPOTENCY_CONFLICT');
  assert.deepEqual(await written(w.tenantId), before);
});

test('two identical replies at once give one send: the others wait for it and replay its answer', async () => {
  const w = await world('webchat');
  const first = await inbound(app, w.tenantId, w.channelId, { handle: `guest-${++seq}` });
  const results = await Promise.all(Array.from({ length: 4 }, () => reply(w.key, first.conversationId, { text: 'Hello!' }, 'race')));
  assert.deepEqual(results.map((res) => res.statusCode), [202, 202, 202, 202], results.map((res) => res.body).join('\n'));
  assert.equal(new Set(results.map((res) => res.json().messageId)).size, 1, 'one message id in every answer');
  assert.equal(results.filter((res) => res.headers['idempotent-replayed'] === 'true').length, 3);
  const { messages, requests } = await written(w.tenantId);
  assert.equal(messages, 2, 'the inbound and one reply');
  assert.equal(requests, 1);
  assert.equal((await events(w.tenantId, 'message.created')).length, 2, 'message.created of the inbound and of the one reply');
});

test('one Idempotency-Key on two different replies at once: one is sent, the other is 409', async () => {
  const w = await world('webchat');
  const first = await inbound(app, w.tenantId, w.channelId, { handle: `guest-${++seq}` });
  const results = await Promise.all([reply(w.key, first.conversationId, { text: 'One' }, 'clash'), reply(w.key, first.conversationId, { text: 'Two' }, 'clash')]);
  assert.deepEqual(results.map((res) => res.statusCode).sort(), [202, 409], results.map((res) => res.body).join('\n'));
  errorOf(results.find((res) => res.statusCode === 409) ?? results[0], 409, 'M2M_IDEMPOTENCY_CONFLICT');
  const { messages, requests } = await written(w.tenantId);
  assert.equal(messages, 2, 'the inbound and one reply');
  assert.equal(requests, 1);
});

test('replies that arrive together are written together, each with its own answer, and each is sent', async () => {
  const w = await world('whatsapp');
  const open = await inbound(app, w.tenantId, w.channelId, { phone: phone() });
  const other = await inbound(app, w.tenantId, w.channelId, { phone: phone() });
  const late = await app.admin<{ conversationId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, {
    channelId: w.channelId, contact: { phone: phone() }, text: 'old', receivedAt: new Date(Date.now() - 25 * HOUR).toISOString(),
  });
  const optedOut = await inbound(app, w.tenantId, w.channelId, { phone: phone() });
  await app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${optedOut.contactId}`, { optedOut: true });
  const before = await written(w.tenantId);

  // Sixteen at once: a group's replies are refused or accepted one by one, and a key used twice in it is a replay or a 409.
  const cases: Array<{ conversationId: string; text: string; key: string; status: number; reason?: string }> = [
    ...Array.from({ length: 6 }, (_, i) => ({ conversationId: i % 2 ? open.conversationId : other.conversationId, text: `hello ${i}`, key: `group-${i}`, status: 202 })),
    { conversationId: late.conversationId, text: 'late', key: 'group-late', status: 409, reason: 'outside_customer_service_window' },
    { conversationId: optedOut.conversationId, text: 'hi', key: 'group-out', status: 409, reason: 'recipient_opted_out' },
    { conversationId: open.conversationId, text: 'twice', key: 'group-twice', status: 202 },
    { conversationId: open.conversationId, text: 'twice', key: 'group-twice', status: 202 },
    { conversationId: other.conversationId, text: 'clash one', key: 'group-clash', status: 202 },
    { conversationId: other.conversationId, text: 'clash two', key: 'group-clash', status: 409 },
    ...Array.from({ length: 4 }, (_, i) => ({ conversationId: open.conversationId, text: `more ${i}`, key: `group-more-${i}`, status: 202 })),
  ];
  const results = await Promise.all(cases.map((c) => reply(w.key, c.conversationId, { text: c.text }, c.key)));
  // The first of a clashing pair is whichever was written first: compare the pair as a set.
  const statuses = results.map((res) => res.statusCode);
  assert.deepEqual([statuses[10], statuses[11]].sort(), [202, 409], results[10].body + results[11].body);
  for (const [i, c] of cases.entries()) {
    if (c.key === 'group-clash') continue;
    assert.equal(statuses[i], c.status, `${c.key}: ${results[i].body}`);
    if (c.reason) assert.equal(errorOf(results[i], 409, 'M2M_CONFLICT').reason, c.reason);
  }
  errorOf(results[statuses[10] === 409 ? 10 : 11], 409, 'M2M_IDEMPOTENCY_CONFLICT');
  assert.equal(results[8].json().messageId, results[9].json().messageId, 'the same key and body: one message');
  assert.equal([results[8], results[9]].filter((res) => res.headers['idempotent-replayed'] === 'true').length, 1);

  const accepted = new Set(results.filter((res) => res.statusCode === 202).map((res) => res.json().messageId as string));
  assert.equal(accepted.size, 12, 'six, four more, one of twice, one of the clash');
  const after = await written(w.tenantId);
  assert.equal(after.messages - before.messages, 12);
  assert.equal(after.requests - before.requests, 12);
  // Each accepted reply is sent by the workers (whose dispatch starts and acceptances are grouped too), and announced once.
  await eventually(async () => (await events(w.tenantId, 'message.delivery.updated')).filter((e) => e.status === 'sent').length === 12, 10_000, '12 sends');
  const created = (await events(w.tenantId, 'message.created')).filter((e) => e.direction === 'outbound');
  assert.deepEqual(new Set(created.map((e) => e.messageId)), accepted);
});

test('messages page newest first with a cursor bound to the direction filter', async () => {
  const w = await world('webchat');
  const handle = `pager-${++seq}`;
  const first = await inbound(app, w.tenantId, w.channelId, { handle }, 'm1');
  const ids = [first.messageId];
  for (let n = 2; n <= 5; n++) {
    if (n % 2 === 0) {
      const res = await reply(w.key, first.conversationId, { text: `r${n}` });
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
  const w = await world('webchat');
  const other = await world('webchat');
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
  errorOf(await reply(w.key, theirs.conversationId, { text: 'hi' }), 404, 'M2M_NOT_FOUND');
  assert.equal((await written(other.tenantId)).messages, 1);
});

test('bad replies are 400 and write nothing', async () => {
  const w = await world('webchat');
  const first = await inbound(app, w.tenantId, w.channelId, { handle: `v-${++seq}` });
  const before = await written(w.tenantId);
  errorOf(await reply(w.key, first.conversationId, { text: '' }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(w.key, first.conversationId, { text: '   ' }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(w.key, first.conversationId, { text: 'x'.repeat(4097) }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(w.key, first.conversationId, { text: 'hi', extra: 1 }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(w.key, first.conversationId, { text: 'hi' }, null), 400, 'M2M_INVALID_REQUEST');
  assert.deepEqual(await written(w.tenantId), before);
  assert.equal((await reply(w.key, first.conversationId, { text: 'x'.repeat(4096) })).statusCode, 202);
});

test("channel rules: WhatsApp's 24-hour window, opt-out and unavailable channels are refused up front, writing nothing", async () => {
  const w = await world('whatsapp');
  const guest = phone();
  const old = await app.admin<{ conversationId: string; contactId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, {
    channelId: w.channelId,
    contact: { phone: guest },
    text: 'old',
    receivedAt: new Date(Date.now() - 25 * HOUR).toISOString(),
  });
  const before = await written(w.tenantId);
  const details = errorOf(await reply(w.key, old.conversationId, { text: 'late' }, 'window-key'), 409, 'M2M_CONFLICT');
  assert.equal(details.reason, 'outside_customer_service_window');
  assert.deepEqual(await written(w.tenantId), before, 'nothing written, the key released');

  // A new inbound message opens the window again; the released key is usable.
  await inbound(app, w.tenantId, w.channelId, { phone: guest }, 'are you there?');
  assert.equal((await reply(w.key, old.conversationId, { text: 'late' }, 'window-key')).statusCode, 202);

  await app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${old.contactId}`, { optedOut: true });
  assert.equal(errorOf(await reply(w.key, old.conversationId, { text: 'hi' }), 409, 'M2M_CONFLICT').reason, 'recipient_opted_out');

  // Within the window by a minute: allowed.
  const recent = await app.admin<{ conversationId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, {
    channelId: w.channelId, contact: { phone: phone() }, text: 'x', receivedAt: new Date(Date.now() - 23 * HOUR - 59 * 60_000).toISOString(),
  });
  assert.equal((await reply(w.key, recent.conversationId, { text: 'hi' })).statusCode, 202);

  const down = await world('whatsapp', { available: false });
  const stuck = await inbound(app, down.tenantId, down.channelId, { phone: phone() });
  const unavailable = errorOf(await reply(down.key, stuck.conversationId, { text: 'hi' }), 400, 'M2M_INVALID_REQUEST');
  assert.equal(unavailable.reason, 'channel_unavailable');
  assert.equal((await written(down.tenantId)).messages, 1);
});

test('a WhatsApp conversation started with a template, where the contact never wrote, has no open window', async () => {
  const w = await world('whatsapp');
  await app.admin('PUT', `/tenants/${w.tenantId}/channels/${w.channelId}/templates/conversation_start`, { category: 'UTILITY', locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
  const guest = phone();
  await app.admin('POST', `/tenants/${w.tenantId}/contacts`, { phone: guest, consent: true });
  const started = await app.api(w.key, 'POST', '/conversations/start', { channelId: w.channelId, recipientPhone: guest, locale: 'en_US', messageText: 'Welcome' }, { 'idempotency-key': 'start' });
  assert.equal(started.statusCode, 202, started.body);
  const details = errorOf(await reply(w.key, started.json().conversationId, { text: 'hi' }), 409, 'M2M_CONFLICT');
  assert.equal(details.reason, 'outside_customer_service_window');
  assert.equal(details.lastInboundAt, undefined);
});

test('Messenger and Instagram have a 24-hour window too; webchat has none', async () => {
  const old = new Date(Date.now() - 48 * HOUR).toISOString();
  for (const [kind, allowed] of [['messenger', false], ['instagram', false], ['webchat', true]] as const) {
    const w = await world(kind);
    const conv = await app.admin<{ conversationId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, { channelId: w.channelId, contact: { handle: `h-${++seq}` }, text: 'x', receivedAt: old });
    const res = await reply(w.key, conv.conversationId, { text: 'hi' });
    if (allowed) assert.equal(res.statusCode, 202, `${kind}: ${res.body}`);
    else assert.equal(errorOf(res, 409, 'M2M_CONFLICT').reason, 'outside_customer_service_window', kind);
  }
});

test('inbound receivedAt imports history: message time, last activity and the window use it; the future is refused', async () => {
  const w = await world('whatsapp');
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
