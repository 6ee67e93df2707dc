import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { mergeEntries, metaFixture, postCallback, startFakeGraph, whatsappImageMessage, whatsappStatus, whatsappTextMessage, type FakeGraph } from '../helpers/fake-graph.js';

// Meta's callbacks end to end: signed payloads built from Meta's documented examples are posted to the real
// server over HTTP, stored, processed by the workers, and appear as messages and events. Sends go to the fake
// Graph API on 127.0.0.1.

const APP_SECRET = 'whatsapp-callbacks-app-secret';
const TOKEN = 'whatsapp-callbacks-system-token';
const SCOPES = ['conversations:read', 'conversations:write', 'messages:read', 'webhooks:read'];

let app: TestApp;
let graph: FakeGraph;
let baseUrl: string;
let seq = 0;

interface World {
  tenantId: string;
  key: string;
  channelId: string;
  phoneNumberId: string;
}

before(async () => {
  graph = await startFakeGraph();
  app = await startTestApp({
    startWorkers: true,
    env: { META_APP_SECRET: APP_SECRET, META_VERIFY_TOKEN: 'verify-me', META_SYSTEM_USER_TOKEN: TOKEN, META_GRAPH_BASE_URL: graph.baseUrl },
  });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}`;
});

after(async () => {
  await app.close();
  await graph.close();
});

async function world(): Promise<World> {
  const { tenantId, key } = await app.tenantWithKey(SCOPES);
  const phoneNumberId = String(106540352200000 + ++seq);
  graph.addWhatsAppNumber({ phoneNumberId, wabaId: '102290129340398', token: TOKEN });
  const channel = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, {
    kind: 'whatsapp',
    name: 'WhatsApp line',
    provider: 'whatsapp_cloud',
    connection: { phoneNumberId, wabaId: '102290129340398' },
  });
  return { tenantId, key, channelId: channel.channelId, phoneNumberId };
}

/** A documented example addressed to the world's number. */
function fixtureFor(name: string, w: World): unknown {
  const payload = metaFixture(name) as { entry: Array<{ changes: Array<{ value: { metadata: { phone_number_id: string } } }> }> };
  for (const entry of payload.entry) for (const change of entry.changes) change.value.metadata.phone_number_id = w.phoneNumberId;
  return payload;
}

async function allProcessed(): Promise<void> {
  const db = app.runtime.services.db;
  await eventually(async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM provider_callbacks WHERE processed_at IS NULL'))[0].n === 0, 20_000, 'callbacks processed');
}

async function post(payload: unknown, options: { signature?: string; path?: string } = {}) {
  return postCallback(`${baseUrl}${options.path ?? '/providers/meta/webhook'}`, payload, APP_SECRET, options);
}

interface Message {
  messageId: string;
  type: string;
  text?: string;
  direction: string;
  source: string;
  createdAt: string;
  media?: Record<string, unknown>;
  location?: Record<string, unknown>;
  interactive?: Record<string, unknown>;
  reaction?: Record<string, unknown>;
  replyToMessageId?: string;
  status?: string;
  readAt?: string;
}

async function conversationsOf(w: World): Promise<Array<{ conversationId: string; unreadCount: number; needsReply: boolean; contact?: { phone?: string } }>> {
  const res = await app.api(w.key, 'GET', '/conversations');
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { conversations: Array<{ conversationId: string; unreadCount: number; needsReply: boolean }> }).conversations;
}

async function messagesOf(w: World, conversationId: string): Promise<Message[]> {
  const res = await app.api(w.key, 'GET', `/conversations/${conversationId}/messages?limit=100`);
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { messages: Message[] }).messages;
}

async function eventsOf(w: World, type: string): Promise<Array<Record<string, unknown>>> {
  const rows = await app.runtime.services.db.query<{ body: string }>('SELECT body FROM webhook_events WHERE tenant_id = $1 AND type = $2 ORDER BY created_at', [w.tenantId, type]);
  return rows.map((row) => (JSON.parse(row.body) as { data: Record<string, unknown> }).data);
}

async function storedCallbacks(): Promise<number> {
  return (await app.runtime.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM provider_callbacks'))[0].n;
}

describe('Meta callbacks: handshake, signature, envelope', () => {
  test('GET handshake echoes hub.challenge as text on both paths; a wrong token is 401', async () => {
    for (const path of ['/providers/meta/webhook', '/providers/whatsapp/webhook']) {
      const ok = await fetch(`${baseUrl}${path}?hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=8675309`);
      assert.equal(ok.status, 200);
      assert.equal(await ok.text(), '8675309');
      const wrong = await fetch(`${baseUrl}${path}?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1`);
      assert.equal(wrong.status, 401);
    }
  });

  test('a bad or missing signature is 401 and nothing is stored', async () => {
    const w = await world();
    const before = await storedCallbacks();
    const payload = fixtureFor('wa-text', w);
    assert.equal((await post(payload, { signature: `sha256=${'0'.repeat(64)}` })).status, 401);
    assert.equal((await post(payload, { signature: '' })).status, 401);
    const unsigned = await fetch(`${baseUrl}/providers/meta/webhook`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    assert.equal(unsigned.status, 401);
    assert.equal(await storedCallbacks(), before);
  });

  test('malformed JSON or an unknown object is 400 and nothing is stored', async () => {
    const before = await storedCallbacks();
    const { signMetaPayload } = await import('../../src/channels/providers/meta/signature.js');
    const raw = '{"object": "whatsapp_business_account", "entry": [';
    const malformed = await fetch(`${baseUrl}/providers/meta/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signMetaPayload(APP_SECRET, raw) }, body: raw });
    assert.equal(malformed.status, 400);
    assert.equal((await post({ object: 'user', entry: [] })).status, 400);
    assert.equal((await post({ object: 'whatsapp_business_account', entry: [{ id: '1' }] })).status, 400);
    assert.equal(await storedCallbacks(), before);
  });

  test('an unknown phone-number id: 200, stored callback processed, no message written', async () => {
    const w = await world();
    const payload = fixtureFor('wa-text', { ...w, phoneNumberId: '999000999000' });
    const res = await post(payload);
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { received: true });
    await allProcessed();
    assert.deepEqual(await conversationsOf(w), []);
    const rows = await app.runtime.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM messages WHERE provider_message_id = 'wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=' AND tenant_id = $1`, [w.tenantId]);
    assert.equal(rows[0].n, 0);
  });
});

describe('Meta callbacks: inbound messages', () => {
  test('a text message arrives: contact by wa_id, conversation, message with the provider timestamp, unread and needs-reply, message.created', async () => {
    const w = await world();
    const res = await post(fixtureFor('wa-text', w));
    assert.equal(res.status, 200, res.body);
    await allProcessed();
    const [conversation] = await conversationsOf(w);
    assert.ok(conversation, 'a conversation was created');
    assert.equal(conversation.unreadCount, 1);
    assert.equal(conversation.needsReply, true);
    const [message] = await messagesOf(w, conversation.conversationId);
    assert.equal(message.type, 'text');
    assert.equal(message.text, 'Hi, is breakfast included?');
    assert.equal(message.direction, 'inbound');
    assert.equal(message.source, 'channel');
    assert.equal(message.createdAt, new Date(1739321024 * 1000).toISOString());
    const contacts = await app.runtime.services.db.query<{ phone_e164: string; name: string }>('SELECT phone_e164, name FROM contacts WHERE tenant_id = $1', [w.tenantId]);
    assert.deepEqual(contacts, [{ phone_e164: '+16505551234', name: 'Sheena Nelson' }]);
    const created = await eventsOf(w, 'message.created');
    assert.deepEqual(created, [{ messageId: message.messageId, conversationId: conversation.conversationId, direction: 'inbound', channel: 'whatsapp', type: 'text' }]);
  });

  test('a redelivery (same wamid) writes and emits nothing; the alias path works the same', async () => {
    const w = await world();
    assert.equal((await post(fixtureFor('wa-text', w))).status, 200);
    assert.equal((await post(fixtureFor('wa-text', w), { path: '/providers/whatsapp/webhook' })).status, 200);
    await allProcessed();
    const [conversation] = await conversationsOf(w);
    assert.equal((await messagesOf(w, conversation.conversationId)).length, 1);
    assert.equal(conversation.unreadCount, 1);
    assert.equal((await eventsOf(w, 'message.created')).length, 1);
  });

  test('every documented kind: image (media pending), location, interactive replies, button, reaction, unsupported, reply context', async () => {
    const w = await world();
    for (const name of ['wa-text', 'wa-image', 'wa-location', 'wa-interactive-button-reply', 'wa-interactive-list-reply', 'wa-button', 'wa-reaction', 'wa-unsupported', 'wa-text-reply', 'wa-contacts', 'wa-sticker', 'wa-audio', 'wa-video', 'wa-document']) {
      assert.equal((await post(fixtureFor(name, w))).status, 200, name);
    }
    await allProcessed();
    const conversations = await conversationsOf(w);
    const messages = (await Promise.all(conversations.map((c) => messagesOf(w, c.conversationId)))).flat();
    const byType = new Map<string, Message[]>();
    for (const m of messages) byType.set(m.type, [...(byType.get(m.type) ?? []), m]);
    const image = byType.get('image')?.[0];
    assert.ok(image);
    // Pending until the download job runs; the fixture's media id is unknown to the fake, so it may already have failed.
    assert.equal(image.media?.contentType, 'image/jpeg');
    assert.ok(['pending', 'failed'].includes(String(image.media?.status)));
    assert.equal(image.text, 'Our room view');
    const location = byType.get('location')?.[0];
    assert.ok(location?.location);
    assert.equal(typeof location.location.latitude, 'number');
    assert.ok((byType.get('interactive_reply') ?? []).length >= 3, 'button reply, list reply and template button');
    for (const m of byType.get('interactive_reply') ?? []) assert.ok(m.interactive && ['button_reply', 'list_reply'].includes(String(m.interactive.kind)));
    assert.ok(byType.get('reaction')?.[0]?.reaction);
    assert.ok(byType.get('unsupported'));
    for (const kind of ['sticker', 'audio', 'video', 'document', 'contacts']) assert.ok(byType.get(kind), kind);
    // Every message is a JSON-valid read and was emitted with its type.
    const created = await eventsOf(w, 'message.created');
    assert.equal(created.length, messages.length);
    assert.ok(created.every((e) => typeof e.type === 'string'));
  });

  test('replyToMessageId names our message when the guest replies to one we know', async () => {
    const w = await world();
    const now = Math.floor(Date.now() / 1000);
    await post(whatsappTextMessage({ phoneNumberId: w.phoneNumberId, from: '5215512340001', id: 'wamid.FIRST', timestamp: now - 5, text: 'first' }));
    await allProcessed();
    await post(whatsappTextMessage({ phoneNumberId: w.phoneNumberId, from: '5215512340001', id: 'wamid.SECOND', timestamp: now, text: 'about that', replyTo: 'wamid.FIRST' }));
    await allProcessed();
    const [conversation] = await conversationsOf(w);
    const [second, first] = await messagesOf(w, conversation.conversationId);
    assert.equal(second.replyToMessageId, first.messageId);
  });

  test('emoji and astral characters round-trip, a long emoji preview stays valid, and the reply goes out in Meta shape', async () => {
    const w = await world();
    const text = `${'🏨🌴'.repeat(100)} 𝒜 ok`;
    await post(whatsappTextMessage({ phoneNumberId: w.phoneNumberId, from: '5215512340002', id: 'wamid.EMOJI', timestamp: Math.floor(Date.now() / 1000), text }));
    await allProcessed();
    const [conversation] = await conversationsOf(w);
    const [message] = await messagesOf(w, conversation.conversationId);
    assert.equal(message.text, text);
    const conv = await app.api(w.key, 'GET', `/conversations/${conversation.conversationId}`);
    assert.equal(conv.statusCode, 200, conv.body);
    const reply = `${'😀'.repeat(139)}👍🏽 gracias`;
    const res = await app.api(w.key, 'POST', `/conversations/${conversation.conversationId}/messages`, { text: reply }, { 'idempotency-key': randomUUID() });
    assert.equal(res.statusCode, 202, res.body);
    const sent = await eventually(async () => graph.sent(w.phoneNumberId, 'messages').find((r) => (r.json as { type?: string }).type === 'text'), 20_000, 'the reply at the Graph API');
    assert.deepEqual(sent.json, { messaging_product: 'whatsapp', recipient_type: 'individual', to: '5215512340002', type: 'text', text: { body: reply, preview_url: false } });
    assert.equal(sent.headers.authorization, `Bearer ${TOKEN}`);
    const after = await app.api(w.key, 'GET', `/conversations/${conversation.conversationId}`);
    assert.equal(after.statusCode, 200, after.body);
    const preview = (after.json() as { lastMessagePreview?: string }).lastMessagePreview ?? '';
    assert.ok(preview.endsWith('…'));
    assert.equal(preview.isWellFormed(), true);
  });
});

describe('Meta callbacks: statuses', () => {
  test('statuses move an outbound message forward only, emit message.delivery.updated, and set readAt', async () => {
    const w = await world();
    const now = Math.floor(Date.now() / 1000);
    await post(whatsappTextMessage({ phoneNumberId: w.phoneNumberId, from: '5215512340003', id: 'wamid.IN3', timestamp: now, text: 'hello' }));
    await allProcessed();
    const [conversation] = await conversationsOf(w);
    const res = await app.api(w.key, 'POST', `/conversations/${conversation.conversationId}/messages`, { text: 'Welcome!' }, { 'idempotency-key': randomUUID() });
    assert.equal(res.statusCode, 202, res.body);
    const { requestEventId, messageId } = res.json() as { requestEventId: string; messageId: string };
    const row = await eventually(
      async () => (await app.runtime.services.db.query<{ provider_message_id: string | null; status: string }>('SELECT provider_message_id, status FROM message_requests WHERE id = $1', [requestEventId]))[0]?.provider_message_id ? (await app.runtime.services.db.query<{ provider_message_id: string }>('SELECT provider_message_id FROM message_requests WHERE id = $1', [requestEventId]))[0] : undefined,
      20_000,
      'sent',
    );
    const wamid = row.provider_message_id;
    const status = (s: 'sent' | 'delivered' | 'read' | 'failed', ts: number) => whatsappStatus({ phoneNumberId: w.phoneNumberId, id: wamid, status: s, recipient: '5215512340003', timestamp: ts });
    await post(status('read', now + 2));
    await post(status('delivered', now + 1));
    await post(status('sent', now));
    await allProcessed();
    const messages = await messagesOf(w, conversation.conversationId);
    const outbound = messages.find((m) => m.messageId === messageId);
    assert.equal(outbound?.status, 'read');
    assert.equal(outbound?.readAt, new Date((now + 2) * 1000).toISOString());
    const updates = (await eventsOf(w, 'message.delivery.updated')).map((e) => e.status);
    assert.deepEqual(updates, ['sent', 'read']);
  });

  test('the statuses of one callback apply together, in order: chains move forward, unknown ids are skipped, a 131047 failure closes the window', async () => {
    const w = await world();
    const now = Math.floor(Date.now() / 1000);
    const guests = ['5215512340021', '5215512340022'];
    for (const [i, from] of guests.entries()) await post(whatsappTextMessage({ phoneNumberId: w.phoneNumberId, from, id: `wamid.GROUP${i}`, timestamp: now, text: 'hello' }));
    await allProcessed();
    const sends: Array<{ conversationId: string; requestEventId: string; messageId: string; wamid: string }> = [];
    for (const conversation of await conversationsOf(w)) {
      const res = await app.api(w.key, 'POST', `/conversations/${conversation.conversationId}/messages`, { text: 'Welcome!' }, { 'idempotency-key': randomUUID() });
      assert.equal(res.statusCode, 202, res.body);
      const { requestEventId, messageId } = res.json() as { requestEventId: string; messageId: string };
      const wamid = await eventually(
        async () => (await app.runtime.services.db.query<{ provider_message_id: string | null }>('SELECT provider_message_id FROM message_requests WHERE id = $1', [requestEventId]))[0]?.provider_message_id ?? undefined,
        20_000,
        'sent',
      );
      sends.push({ conversationId: conversation.conversationId, requestEventId, messageId, wamid });
    }
    const [a, b] = sends;
    const status = (id: string, s: 'sent' | 'delivered' | 'read' | 'failed', ts: number, errorCode?: number) =>
      whatsappStatus({ phoneNumberId: w.phoneNumberId, id, status: s, recipient: guests[0], timestamp: ts, ...(errorCode ? { errorCode, errorTitle: 'Re-engagement message' } : {}) });
    const parts = [status(a.wamid, 'delivered', now + 1), status(a.wamid, 'sent', now), status('wamid.NOT_OURS', 'read', now + 1), status(a.wamid, 'read', now + 2), status(b.wamid, 'failed', now, 131047), status(a.wamid, 'delivered', now + 3)];
    await post(mergeEntries(parts));
    await allProcessed();

    const outbound = async (send: (typeof sends)[number]) => (await messagesOf(w, send.conversationId)).find((m) => m.messageId === send.messageId);
    const readOne = await outbound(a);
    assert.equal(readOne?.status, 'read');
    assert.equal(readOne?.readAt, new Date((now + 2) * 1000).toISOString());
    assert.equal((await outbound(b))?.status, 'failed');
    const updates = await eventsOf(w, 'message.delivery.updated');
    const of = (send: (typeof sends)[number]) => updates.filter((e) => e.requestEventId === send.requestEventId).map((e) => e.status);
    // The pipeline's own move to sent, then the callback's moves; the late `sent` and `delivered` are no moves.
    assert.deepEqual(of(a).sort(), ['delivered', 'read', 'sent']);
    assert.deepEqual(of(b).sort(), ['failed', 'sent']);
    assert.equal(updates.find((e) => e.requestEventId === b.requestEventId && e.status === 'failed')?.errorCode, 'whatsapp_131047');
    const refused = await app.api(w.key, 'POST', `/conversations/${b.conversationId}/messages`, { text: 'Still there?' }, { 'idempotency-key': randomUUID() });
    assert.equal(refused.statusCode, 409, refused.body);
    assert.equal((refused.json() as { error: { details?: { reason?: string } } }).error.details?.reason, 'outside_customer_service_window');
  });
});

describe('Meta callbacks: media', () => {
  test('inbound media is downloaded into the blob store by a job (ready, size, type); an unknown media id ends failed with a reason, the message kept', async () => {
    const w = await world();
    const bytes = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(2048, 7)]);
    graph.addMedia({ mediaId: '880001', bytes, mimeType: 'image/jpeg', token: TOKEN });
    const now = Math.floor(Date.now() / 1000);
    await post(whatsappImageMessage({ phoneNumberId: w.phoneNumberId, from: '14155550190', id: 'wamid.IMG1', timestamp: now - 1, mediaId: '880001', caption: 'view 🌅' }));
    await post(whatsappImageMessage({ phoneNumberId: w.phoneNumberId, from: '14155550190', id: 'wamid.IMG2', timestamp: now, mediaId: '880404' }));
    await allProcessed();
    const [conversation] = await conversationsOf(w);
    const done = await eventually(
      async () => {
        const messages = await messagesOf(w, conversation.conversationId);
        return messages.every((m) => m.media?.status !== 'pending') ? messages : undefined;
      },
      20_000,
      'media downloads',
    );
    const ready = done.find((m) => m.text === 'view 🌅');
    assert.deepEqual(ready?.media, { contentType: 'image/jpeg', sizeBytes: bytes.length, status: 'ready' });
    const { mediaBlobKey } = await import('../../src/channels/media-download.js');
    assert.deepEqual(await app.runtime.services.blobs.get(mediaBlobKey(w.tenantId, ready!.messageId)), bytes);
    const failed = done.find((m) => m.text === undefined);
    assert.equal(failed?.media?.status, 'failed');
    assert.equal(typeof failed?.media?.reason, 'string');
  });
});
