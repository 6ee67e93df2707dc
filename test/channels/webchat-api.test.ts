import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { startTestApp, eventually, type TestApp } from '../helpers/app.js';
import { SITE, SseReader, newVisitor, say, visitorCall, webchatWorld } from '../helpers/webchat.js';
import { signSessionToken, webchatTokenKey } from '../../src/channels/webchat/token.js';
import { WebchatProvider } from '../../src/channels/webchat/provider.js';
import { systemClock } from '../../src/clock.js';

// The webchat visitor API of decisions 7.3 against the real server and database: sessions, messages, the stream,
// and every refusal (origins, tokens, limits, another visitor's conversation).

const RATE = 5;
let app: TestApp;
let base: string;

before(async () => {
  app = await startTestApp({ startWorkers: true, env: { WEBCHAT_RATE_LIMIT_PER_MINUTE: String(RATE) } });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}/webchat/v1`;
});
after(async () => {
  await app.close();
});

function errorOf(res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as { error: { code: string; message: string; details: Record<string, unknown> } };
  assert.equal(body.error.code, code);
  assert.ok(res.headers['x-request-id'], 'X-Request-Id');
  return body.error.details;
}

function stream(token: string, headers: Record<string, string> = {}, query = ''): Promise<SseReader> {
  return SseReader.open(`${base}/stream?sessionToken=${encodeURIComponent(token)}${query}`, { origin: SITE, ...headers });
}

describe('channel and session', () => {
  test('a webchat channel answers its public widgetId; a session starts only from an allowed origin', async () => {
    const world = await webchatWorld(app);
    assert.equal(world.channel.provider, 'webchat');
    assert.match(world.widgetId, /^[A-Za-z0-9_-]{20,}$/);

    const created = await visitorCall(app, 'POST', '/sessions', { body: { widgetId: world.widgetId, name: 'Ana' } });
    assert.equal(created.statusCode, 201, created.body);
    const session = created.json() as { sessionToken: string; visitorId: string; conversationId?: string };
    assert.ok(session.sessionToken && session.visitorId);
    assert.equal(session.conversationId, undefined);
    assert.equal(created.headers['access-control-allow-origin'], SITE);

    assert.equal(errorOf(await visitorCall(app, 'POST', '/sessions', { origin: 'https://evil.example', body: { widgetId: world.widgetId } }), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE').reason, 'origin_not_allowed');
    errorOf(await visitorCall(app, 'POST', '/sessions', { origin: null, body: { widgetId: world.widgetId } }), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    errorOf(await visitorCall(app, 'POST', '/sessions', { body: { widgetId: 'wgt_nosuchwidgetatallhere' } }), 404, 'M2M_NOT_FOUND');
    errorOf(await visitorCall(app, 'POST', '/sessions', { body: { widgetId: world.widgetId, tenantId: world.tenantId } }), 400, 'M2M_INVALID_REQUEST');
    errorOf(await visitorCall(app, 'POST', '/sessions', { body: {} }), 400, 'M2M_INVALID_REQUEST');
  });

  test('CORS preflights are answered for allowed origins only', async () => {
    await webchatWorld(app);
    const ok = await visitorCall(app, 'OPTIONS', '/messages', { headers: { 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });
    assert.equal(ok.statusCode, 204);
    assert.equal(ok.headers['access-control-allow-origin'], SITE);
    assert.match(String(ok.headers['access-control-allow-headers']), /authorization/);
    const refused = await visitorCall(app, 'OPTIONS', '/sessions', { origin: 'https://evil.example', headers: { 'access-control-request-method': 'POST' } });
    errorOf(refused, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.equal(refused.headers['access-control-allow-origin'], undefined);
  });

  test('a token is refused on an origin its widget does not allow, even one another widget allows', async () => {
    const mine = await webchatWorld(app, [SITE]);
    await webchatWorld(app, ['https://other-hotel.example']);
    const visitor = await newVisitor(app, mine.widgetId);
    const res = await visitorCall(app, 'POST', '/messages', { token: visitor.sessionToken, origin: 'https://other-hotel.example', body: { text: 'hi' } });
    errorOf(res, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
  });
});

describe('tokens', () => {
  test('missing, forged, re-signed, other-widget and idle-expired tokens are 401', async () => {
    const world = await webchatWorld(app);
    const visitor = await newVisitor(app, world.widgetId);
    errorOf(await visitorCall(app, 'GET', '/messages'), 401, 'M2M_AUTH_MISSING_CREDENTIALS');
    const [prefix, payload, mac] = visitor.sessionToken.split('.');
    const flipped = `${prefix}.${payload}.${mac.slice(0, -2)}${mac.endsWith('AA') ? 'BB' : 'AA'}`;
    errorOf(await visitorCall(app, 'GET', '/messages', { token: flipped }), 401, 'M2M_AUTH_INVALID_CREDENTIALS');
    errorOf(await visitorCall(app, 'GET', '/messages', { token: 'not-a-token' }), 401, 'M2M_AUTH_INVALID_CREDENTIALS');
    // Signed with a key that is not the server's.
    const foreign = signSessionToken(webchatTokenKey(Buffer.alloc(32, 7)), { widgetId: world.widgetId, visitorId: visitor.visitorId });
    errorOf(await visitorCall(app, 'GET', '/messages', { token: foreign }), 401, 'M2M_AUTH_INVALID_CREDENTIALS');
    // A visitor id moved onto another widget's payload: the MAC no longer matches.
    const other = await webchatWorld(app);
    const moved = `${prefix}.${Buffer.from(JSON.stringify({ w: other.widgetId, v: visitor.visitorId })).toString('base64url')}.${mac}`;
    errorOf(await visitorCall(app, 'GET', '/messages', { token: moved }), 401, 'M2M_AUTH_INVALID_CREDENTIALS');

    assert.equal((await visitorCall(app, 'GET', '/messages', { token: visitor.sessionToken })).statusCode, 200);
    await app.runtime.services.db.query(`UPDATE webchat_sessions SET last_seen_at = $2 WHERE id = $1`, [visitor.visitorId, new Date(Date.now() - 31 * 24 * 3_600_000)]);
    errorOf(await visitorCall(app, 'GET', '/messages', { token: visitor.sessionToken }), 401, 'M2M_AUTH_INVALID_CREDENTIALS');
    errorOf(await visitorCall(app, 'POST', '/messages', { token: visitor.sessionToken, body: { text: 'still there?' } }), 401, 'M2M_AUTH_INVALID_CREDENTIALS');
    const expiredStream = await stream(visitor.sessionToken);
    assert.equal(expiredStream.status, 401);
  });
});

describe('messages', () => {
  test('the first message creates the contact (handle = visitorId) and the conversation, and raises message.created', async () => {
    const world = await webchatWorld(app);
    const visitor = await newVisitor(app, world.widgetId);
    const messageId = await say(app, visitor.sessionToken, 'Do you have a room on Friday?');
    const conversations = (await app.api(world.key, 'GET', '/conversations')).json() as { conversations: Array<{ conversationId: string; channel: string }> };
    assert.equal(conversations.conversations.length, 1);
    const [row] = await app.runtime.services.db.query<{ handle: string; text: string; provider_message_id: string }>(
      `SELECT ct.handle, m.text, m.provider_message_id FROM messages m JOIN conversations c ON c.id = m.conversation_id JOIN contacts ct ON ct.id = c.contact_id WHERE m.tenant_id = $1`,
      [world.tenantId],
    );
    assert.deepEqual(row, { handle: visitor.visitorId, text: 'Do you have a room on Friday?', provider_message_id: messageId });
    const events = await app.runtime.services.db.query<{ body: string }>(`SELECT body FROM webhook_events WHERE tenant_id = $1 AND type = 'message.created'`, [world.tenantId]);
    assert.equal(events.length, 1);
    const data = (JSON.parse(events[0].body) as { data: Record<string, unknown> }).data;
    assert.equal(data.direction, 'inbound');
    assert.equal(data.channel, 'webchat');
    assert.equal(data.conversationId, conversations.conversations[0].conversationId);

    await say(app, visitor.sessionToken, 'And parking?');
    assert.equal(((await app.api(world.key, 'GET', '/conversations')).json() as { conversations: unknown[] }).conversations.length, 1, 'same conversation');
    const listed = (await visitorCall(app, 'GET', '/messages', { token: visitor.sessionToken })).json() as { messages: Array<{ messageId: string; text: string; direction: string; eventId: string }> };
    assert.deepEqual(listed.messages.map((m) => [m.text, m.direction]), [['Do you have a room on Friday?', 'inbound'], ['And parking?', 'inbound']]);
    const after = (await visitorCall(app, 'GET', `/messages?after=${listed.messages[0].eventId}`, { token: visitor.sessionToken })).json() as { messages: Array<{ text: string }> };
    assert.deepEqual(after.messages.map((m) => m.text), ['And parking?']);
  });

  test('text limits count Unicode code points; empty, unknown properties and bad queries are 400', async () => {
    const world = await webchatWorld(app);
    const visitor = await newVisitor(app, world.widgetId);
    const token = visitor.sessionToken;
    const emoji = '😀'.repeat(4096); // 4096 code points, 8192 UTF-16 units
    assert.equal((await visitorCall(app, 'POST', '/messages', { token, body: { text: emoji } })).statusCode, 201);
    errorOf(await visitorCall(app, 'POST', '/messages', { token, body: { text: `${emoji}😀` } }), 400, 'M2M_INVALID_REQUEST');
    errorOf(await visitorCall(app, 'POST', '/messages', { token, body: { text: 'a'.repeat(4097) } }), 400, 'M2M_INVALID_REQUEST');
    assert.equal((await visitorCall(app, 'POST', '/messages', { token, body: { text: 'a'.repeat(4096) } })).statusCode, 201);
    errorOf(await visitorCall(app, 'POST', '/messages', { token, body: { text: '' } }), 400, 'M2M_INVALID_REQUEST');
    errorOf(await visitorCall(app, 'POST', '/messages', { token, body: { text: 'hi', conversationId: 'conv_x' } }), 400, 'M2M_INVALID_REQUEST');
    errorOf(await visitorCall(app, 'POST', '/messages', { token, body: {} }), 400, 'M2M_INVALID_REQUEST');
    errorOf(await visitorCall(app, 'GET', '/messages?after=abc', { token }), 400, 'M2M_INVALID_REQUEST');
    errorOf(await visitorCall(app, 'GET', '/messages?visitorId=wcv_x', { token }), 400, 'M2M_INVALID_REQUEST');
  });

  test('one visitor never sees another visitor\'s messages', async () => {
    const world = await webchatWorld(app);
    const ana = await newVisitor(app, world.widgetId);
    const ben = await newVisitor(app, world.widgetId);
    await say(app, ana.sessionToken, 'Ana secret: my card ends 4242');
    await say(app, ben.sessionToken, 'Ben here');
    const bens = (await visitorCall(app, 'GET', '/messages', { token: ben.sessionToken })).json() as { messages: Array<{ text: string }> };
    assert.deepEqual(bens.messages.map((m) => m.text), ['Ben here']);
    const benStream = await stream(ben.sessionToken, {}, '&after=0');
    assert.equal((await benStream.next()).data.text, 'Ben here');
    await say(app, ana.sessionToken, 'Ana again');
    await say(app, ben.sessionToken, 'Ben again');
    assert.equal((await benStream.next()).data.text, 'Ben again');
    assert.ok(benStream.events.every((e) => !String(e.data.text).startsWith('Ana')));
    await benStream.close();
    const conversations = (await app.api(world.key, 'GET', '/conversations')).json() as { conversations: unknown[] };
    assert.equal(conversations.conversations.length, 2, 'one conversation per visitor');
  });

  test('a flood from one session is 429 while another session still posts', async () => {
    const world = await webchatWorld(app);
    const flooder = await newVisitor(app, world.widgetId);
    const calm = await newVisitor(app, world.widgetId);
    for (let i = 0; i < RATE; i++) await say(app, flooder.sessionToken, `spam ${i}`);
    const limited = await visitorCall(app, 'POST', '/messages', { token: flooder.sessionToken, body: { text: 'one more' } });
    const details = errorOf(limited, 429, 'M2M_RATE_LIMITED');
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.ok(Number(details.retryAfterSeconds) >= 1);
    assert.equal(limited.headers['access-control-allow-origin'], SITE, 'the widget can read the refusal');
    await say(app, calm.sessionToken, 'I am not spamming');
    const stored = await app.runtime.services.db.query(`SELECT 1 FROM messages WHERE tenant_id = $1 AND text = 'one more'`, [world.tenantId]);
    assert.equal(stored.length, 0, 'the refused message is not stored');
  });
});

describe('the stream', () => {
  test('a reply from the API reaches the stream at once and is sent; reconnecting with Last-Event-ID misses nothing', async () => {
    const world = await webchatWorld(app);
    const visitor = await newVisitor(app, world.widgetId);
    const live = await stream(visitor.sessionToken);
    assert.equal(live.status, 200);
    assert.equal(live.headers.get('access-control-allow-origin'), SITE);
    await say(app, visitor.sessionToken, 'first');
    const first = await live.next((e) => e.event === 'message');
    assert.equal(first.data.text, 'first');
    assert.equal(first.data.direction, 'inbound');

    const conversationId = ((await app.api(world.key, 'GET', '/conversations')).json() as { conversations: Array<{ conversationId: string }> }).conversations[0].conversationId;
    const replied = await app.api(world.key, 'POST', `/conversations/${conversationId}/messages`, { text: 'Yes, we have rooms.' }, { 'idempotency-key': `wc-${Date.now()}` });
    assert.equal(replied.statusCode, 202, replied.body);
    const reply = await live.next((e) => e.event === 'message');
    assert.deepEqual([reply.data.direction, reply.data.text], ['outbound', 'Yes, we have rooms.']);
    assert.match(String(reply.data.messageId), /^wcm_/);
    await eventually(async () => {
      const page = (await app.api(world.key, 'GET', `/conversations/${conversationId}/messages?direction=outbound`)).json() as { messages: Array<{ status?: string; deliveryStatus?: string }> };
      const status = page.messages[0]?.status ?? page.messages[0]?.deliveryStatus;
      return status === 'sent';
    }, 15_000, 'the reply sent');
    await live.close();

    // While disconnected: two visitor messages and a business reply.
    await say(app, visitor.sessionToken, 'second');
    await say(app, visitor.sessionToken, 'third');
    assert.equal((await app.api(world.key, 'POST', `/conversations/${conversationId}/messages`, { text: 'Anything else?' }, { 'idempotency-key': `wc2-${Date.now()}` })).statusCode, 202);
    const resumed = await stream(visitor.sessionToken, { 'last-event-id': reply.id! });
    const texts: unknown[] = [];
    for (let i = 0; i < 3; i++) texts.push((await resumed.next((e) => e.event === 'message')).data.text);
    assert.deepEqual(texts.slice(0, 2), ['second', 'third']);
    assert.equal(texts[2], 'Anything else?');
    assert.ok(!resumed.events.some((e) => e.data.text === 'first' || e.data.text === 'Yes, we have rooms.'), 'nothing seen before is sent again');
    await resumed.close();
  });

  test('read receipts, typing, reactions and files from the provider reach the visitor; files only the visitor they went to', async () => {
    const world = await webchatWorld(app);
    const visitor = await newVisitor(app, world.widgetId);
    const other = await newVisitor(app, world.widgetId);
    const mine = await say(app, visitor.sessionToken, 'Here is my question');
    const live = await stream(visitor.sessionToken);
    const provider = new WebchatProvider(app.runtime.services.db, systemClock);
    const connection = { provider: 'webchat' as const, widgetId: world.widgetId, allowedOrigins: [SITE] };
    const signal = new AbortController().signal;
    const recipient = { handle: visitor.visitorId };

    assert.deepEqual(await provider.send({ kind: 'read_receipt', providerMessageId: mine, typingIndicator: false, recipient }, connection, signal), {});
    assert.equal((await live.next()).event, 'read');
    await provider.send({ kind: 'typing', recipient }, connection, signal);
    assert.equal((await live.next()).event, 'typing');
    await provider.send({ kind: 'reaction', targetProviderMessageId: mine, emoji: '👍', recipient }, connection, signal);
    const reaction = await live.next();
    assert.deepEqual([reaction.event, reaction.data.messageId, reaction.data.emoji], ['reaction', mine, '👍']);

    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5f6a1e50000000049454e44ae426082', 'hex');
    const uploaded = await provider.upload({ mediaKind: 'image', contentType: 'image/png', filename: 'room.png', bytes: png }, connection);
    const sent = await provider.send({ kind: 'media', mediaKind: 'image', providerMediaId: uploaded.providerMediaId, caption: 'Our suite', recipient }, connection, signal);
    assert.match(String(sent.providerMessageId), /^wcm_/);
    const media = await live.next();
    const attachment = media.data.attachment as { url: string; contentType: string; filename: string; kind: string };
    assert.deepEqual([media.event, media.data.text, attachment.contentType, attachment.filename, attachment.kind], ['message', 'Our suite', 'image/png', 'room.png', 'image']);
    const file = await fetch(`${base.replace('/webchat/v1', '')}${attachment.url}?sessionToken=${encodeURIComponent(visitor.sessionToken)}`, { headers: { origin: SITE } });
    assert.equal(file.status, 200);
    assert.equal(file.headers.get('content-type'), 'image/png');
    assert.deepEqual(Buffer.from(await file.arrayBuffer()), png);
    // <img> and download links send no Origin: the token alone serves the file; a foreign page's fetch is refused.
    const viaImg = await visitorCall(app, 'GET', `${attachment.url.replace('/webchat/v1', '')}?sessionToken=${encodeURIComponent(visitor.sessionToken)}`, { origin: null });
    assert.equal(viaImg.statusCode, 200);
    errorOf(await visitorCall(app, 'GET', `${attachment.url.replace('/webchat/v1', '')}`, { token: visitor.sessionToken, origin: 'https://evil.example' }), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    const theirs = await visitorCall(app, 'GET', `${attachment.url.replace('/webchat/v1', '')}`, { token: other.sessionToken });
    errorOf(theirs, 404, 'M2M_NOT_FOUND');

    await assert.rejects(provider.send({ kind: 'text', text: 'to nobody', recipient: { handle: 'wcv_unknown' } }, connection, signal), /no session/);
    await live.close();
  });
});

describe('retention', () => {
  test('the purge drops old typing rows and sessions idle past 30 days with their streams; live sessions keep theirs', async () => {
    const world = await webchatWorld(app);
    const gone = await newVisitor(app, world.widgetId);
    const kept = await newVisitor(app, world.widgetId);
    await say(app, gone.sessionToken, 'long ago');
    await say(app, kept.sessionToken, 'still here');
    const provider = new WebchatProvider(app.runtime.services.db, systemClock);
    const connection = { provider: 'webchat' as const, widgetId: world.widgetId, allowedOrigins: [SITE] };
    await provider.send({ kind: 'typing', recipient: { handle: kept.visitorId } }, connection, new AbortController().signal);
    const db = app.runtime.services.db;
    await db.query(`UPDATE webchat_sessions SET last_seen_at = $2 WHERE id = $1`, [gone.visitorId, new Date(Date.now() - 31 * 24 * 3_600_000)]);
    await db.query(`UPDATE webchat_events SET created_at = $2 WHERE visitor_id = $1 AND kind = 'typing'`, [kept.visitorId, new Date(Date.now() - 2 * 24 * 3_600_000)]);
    assert.ok((await app.runtime.services.webchat.purgeExpired()) >= 3);
    const left = await db.query<{ visitor_id: string; kind: string }>(`SELECT visitor_id, kind FROM webchat_events WHERE widget_id = $1 ORDER BY id`, [world.widgetId]);
    assert.deepEqual(left, [{ visitor_id: kept.visitorId, kind: 'message' }]);
    assert.equal((await db.query(`SELECT 1 FROM webchat_sessions WHERE id = $1`, [gone.visitorId])).length, 0);
    assert.equal((await visitorCall(app, 'GET', '/messages', { token: kept.sessionToken })).statusCode, 200);
    const conversations = (await app.api(world.key, 'GET', '/conversations')).json() as { conversations: unknown[] };
    assert.equal(conversations.conversations.length, 2, 'the business keeps both conversations');
  });
});

describe('streams across nodes and late commits', { skip: !process.env.DATABASE_URL && 'needs two nodes on one PostgreSQL database' }, () => {
  test('a message written through one node reaches a stream open on another', async () => {
    const nodeB = await startTestApp({ sameDatabaseAs: app });
    try {
      await nodeB.runtime.app.listen({ port: 0, host: '127.0.0.1' });
      const baseB = `http://127.0.0.1:${(nodeB.runtime.app.server.address() as AddressInfo).port}/webchat/v1`;
      const world = await webchatWorld(app);
      const visitor = await newVisitor(app, world.widgetId);
      const onB = await SseReader.open(`${baseB}/stream?sessionToken=${encodeURIComponent(visitor.sessionToken)}`, { origin: SITE });
      assert.equal(onB.status, 200);
      await say(app, visitor.sessionToken, 'written on node A');
      assert.equal((await onB.next()).data.text, 'written on node A');
      await onB.close();
    } finally {
      await nodeB.close();
    }
  });

  test('an event that commits after a later id of another visitor still wakes its stream', async () => {
    const world = await webchatWorld(app);
    const late = await newVisitor(app, world.widgetId);
    const early = await newVisitor(app, world.widgetId);
    const lateStream = await stream(late.sessionToken);
    const earlyStream = await stream(early.sessionToken);
    const db = app.runtime.services.db;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let inserted!: () => void;
    const insertedYet = new Promise<void>((resolve) => (inserted = resolve));
    // Takes an id, then holds its transaction open while another visitor's event (a higher id) commits.
    const slow = db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('webchat|' || $1, 0))`, [late.visitorId]);
      await tx.query(`INSERT INTO webchat_events (tenant_id, widget_id, visitor_id, kind, data, created_at) VALUES ($1, $2, $3, 'typing', '{}', now())`, [world.tenantId, world.widgetId, late.visitorId]);
      tx.notify('webchat');
      inserted();
      await gate;
    });
    await insertedYet;
    await say(app, early.sessionToken, 'committed first with the higher id');
    assert.equal((await earlyStream.next()).data.text, 'committed first with the higher id');
    release();
    await slow;
    assert.equal((await lateStream.next()).event, 'typing');
    await lateStream.close();
    await earlyStream.close();
  });
});
