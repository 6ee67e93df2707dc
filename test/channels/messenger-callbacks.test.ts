import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { eventually } from '../helpers/app.js';
import { mergeEntries, messengerAttachment, messengerDelivery, messengerEcho, messengerRead, messengerTextMessage } from '../helpers/fake-graph.js';
import { startMetaWorld, type MetaWorldHarness } from '../helpers/meta-world.js';

// Messenger end to end: signed callbacks built from Meta's documented examples (test/fixtures/meta) are posted to
// the real server, stored, processed by the workers, and become contacts by page-scoped id, messages of every
// kind, external echoes and status moves; media and profile names come from the fake Graph API and CDN.

let h: MetaWorldHarness;

before(async () => {
  h = await startMetaWorld({ METRICS_PORT: '0', HOST: '127.0.0.1' });
});
after(async () => {
  await h.close();
});

describe('Messenger channels', () => {
  test('created with pageId and pageAccessToken: the token sealed and never answered; GET /channels shows its connection', async () => {
    const w = await h.world('messenger');
    const [row] = await h.db.query<{ connection_secret: string; connection: unknown; provider_ref: string }>('SELECT connection_secret, connection, provider_ref FROM channels WHERE id = $1', [w.channelId]);
    assert.ok(row.connection_secret.startsWith('v1.'));
    assert.ok(!row.connection_secret.includes(w.token));
    assert.deepEqual(row.connection, { pageId: w.accountId });
    assert.equal(row.provider_ref, w.accountId);
    const list = await h.app.api(w.key, 'GET', '/channels');
    assert.equal(list.statusCode, 200, list.body);
    assert.ok(!list.body.includes(w.token));
    const [channel] = (list.json() as { channels: Array<{ channelId: string; kind: string; provider: string; connection: { status: string } }> }).channels;
    assert.deepEqual({ channelId: channel.channelId, kind: channel.kind, provider: channel.provider, status: channel.connection.status }, { channelId: w.channelId, kind: 'messenger', provider: 'messenger', status: 'connected' });
    // A PATCH that leaves the token out keeps it.
    const patched = await h.app.adminRaw('PATCH', `/tenants/${w.tenantId}/channels/${w.channelId}`, { name: 'Renamed', connection: { pageId: w.accountId } });
    assert.equal(patched.statusCode, 200, patched.body);
    const [after] = await h.db.query<{ connection_secret: string }>('SELECT connection_secret FROM channels WHERE id = $1', [w.channelId]);
    assert.ok(after.connection_secret);
  });
});

describe('Messenger inbound', () => {
  test('every documented kind: text, quick reply, postback, image, file, fallback, reaction and unreaction; contact by PSID; message.created each', async () => {
    const w = await h.world('messenger');
    for (const name of ['messenger-text', 'messenger-text-quick-reply', 'messenger-postback', 'messenger-attachment', 'messenger-attachment-file', 'messenger-fallback', 'messenger-reaction', 'messenger-unreact']) {
      await h.post(h.fixtureFor(name, w));
    }
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const messages = await h.messagesOf(w, conversationId);
    const byType = (type: string) => messages.filter((m) => m.type === type);
    assert.equal(messages.length, 8);
    assert.ok(messages.every((m) => m.direction === 'inbound' && m.source === 'channel'));
    assert.deepEqual(byType('text').map((m) => m.text), ['hello, world!']);
    assert.equal(byType('text')[0].createdAt, new Date(1458692752478).toISOString());
    const interactive = byType('interactive_reply').map((m) => m.interactive);
    assert.deepEqual(
      interactive.sort((a, b) => String(a?.id).localeCompare(String(b?.id))),
      [
        { kind: 'button_reply', id: 'BOOK_ROOM', title: 'hello, world!' },
        { kind: 'button_reply', id: 'CHECK_AVAILABILITY', title: 'Check availability' },
      ],
    );
    assert.equal(byType('image')[0].media?.contentType, 'application/octet-stream');
    assert.equal(byType('document').length, 1);
    assert.equal(byType('document')[0].media?.filename, 'test-booking.pdf');
    assert.equal(byType('unsupported').length, 1);
    const reactions = byType('reaction').map((m) => m.reaction?.emoji).sort();
    assert.deepEqual(reactions, ['', '\u2764\ufe0f']);
    const contacts = await h.contactsOf(w);
    assert.deepEqual(
      contacts.map((c) => ({ handle: c.handle, phone: c.phone_e164 })),
      [{ handle: w.guest, phone: null }],
    );
    const created = await h.eventsOf(w, 'message.created');
    assert.equal(created.length, 8);
    assert.ok(created.every((e) => e.direction === 'inbound' && e.channel === 'messenger'));
    const [conversation] = await h.conversationsOf(w);
    assert.equal(conversation.needsReply, true);
  });

  test('reply_to names our message; a redelivery (alone or batched) writes and emits nothing twice', async () => {
    const w = await h.world('messenger');
    const now = Date.now();
    const first = messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: 'm_first', timestamp: now - 2000, text: 'Do you have parking?' });
    const second = messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: 'm_second', timestamp: now - 1000, text: 'about that', replyTo: 'm_first' });
    await h.post(first);
    await h.allProcessed();
    await h.post(second);
    await h.post(first);
    await h.post(mergeEntries([first, second, second]));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const [newest, oldest] = await h.messagesOf(w, conversationId);
    assert.equal(newest.replyToMessageId, oldest.messageId);
    assert.equal((await h.messagesOf(w, conversationId)).length, 2);
    assert.equal((await h.eventsOf(w, 'message.created')).length, 2);
    assert.equal((await h.conversationsOf(w))[0].unreadCount, 2);
  });

  test('the profile name comes from GET /{psid}?fields=name; a profile Meta refuses leaves the contact nameless and the message stored', async () => {
    const w = await h.world('messenger');
    h.graph.setProfile(w.guest, { name: 'Sheena Nelson' });
    await h.post(messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: 'm_named', timestamp: Date.now(), text: 'hi' }));
    await h.allProcessed();
    const named = await eventually(async () => (await h.contactsOf(w)).find((c) => c.name === 'Sheena Nelson'), 30_000, 'the profile name');
    assert.equal(named.handle, w.guest);
    const lookup = h.graph.requests.find((r) => r.path.endsWith(`/${w.guest}`));
    assert.equal(lookup?.query.fields, 'name');
    assert.equal(lookup?.headers.authorization, `Bearer ${w.token}`);

    const v = await h.world('messenger');
    await h.post(messengerTextMessage({ accountId: v.accountId, from: v.guest, mid: 'm_unnamed', timestamp: Date.now(), text: 'hello' }));
    await h.allProcessed();
    await eventually(
      async () => (await h.db.query(`SELECT 1 FROM jobs WHERE task = 'channels.contact-profile' AND tenant_id = $1 AND state IN ('succeeded', 'failed')`, [v.tenantId])).length > 0,
      30_000,
      'the profile job done',
    );
    const [contact] = await h.contactsOf(v);
    assert.equal(contact.name, null);
    assert.equal((await h.messagesOf(v, await h.onlyConversation(v))).length, 1);
  });

  test('attachments are downloaded from their URL (following the CDN redirect) into the blob store', async () => {
    const w = await h.world('messenger');
    const bytes = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(4096, 3)]);
    const url = h.graph.addCdnFile({ name: `t1/${w.accountId}-view.jpg`, bytes, mimeType: 'image/jpeg', redirect: true });
    await h.post(messengerAttachment({ accountId: w.accountId, from: w.guest, mid: 'm_image', timestamp: Date.now() - 10, type: 'image', url }));
    await h.post(messengerAttachment({ accountId: w.accountId, from: w.guest, mid: 'm_gone', timestamp: Date.now(), type: 'video', url: `${h.graph.baseUrl}/cdn/missing.mp4` }));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const done = await eventually(
      async () => {
        const messages = await h.messagesOf(w, conversationId);
        return messages.every((m) => m.media?.status !== 'pending') ? messages : undefined;
      },
      30_000,
      'media downloads',
    );
    const image = done.find((m) => m.type === 'image');
    assert.deepEqual(image?.media, { contentType: 'image/jpeg', sizeBytes: bytes.length, status: 'ready' });
    const { mediaBlobKey } = await import('../../src/channels/media-download.js');
    assert.deepEqual(await h.app.runtime.services.blobs.get(mediaBlobKey(w.tenantId, image!.messageId)), bytes);
    const video = done.find((m) => m.type === 'video');
    assert.deepEqual({ status: video?.media?.status, reason: video?.media?.reason }, { status: 'failed', reason: 'not_found' });
    // The signed URL is not kept once the bytes are ours.
    const [stored] = await h.db.query<{ media: Record<string, unknown> }>('SELECT media FROM messages WHERE id = $1', [image!.messageId]);
    assert.equal(stored.media.url, undefined);
  });

  test('a callback for an unknown page: 200, counted, nothing stored for it', async () => {
    const w = await h.world('messenger');
    const metrics = async () => {
      const res = await request(`http://127.0.0.1:${h.app.runtime.metricsPort}/metrics`);
      const text = await res.body.text();
      const line = text.split('\n').find((l) => l.startsWith('m2m_provider_callback_items_total{') && l.includes('outcome="unknown_channel"'));
      return line ? Number(line.split(' ').pop()) : 0;
    };
    const before = await metrics();
    await h.post(messengerTextMessage({ accountId: '999000999000123', from: w.guest, mid: 'm_nowhere', timestamp: Date.now(), text: 'hello?' }));
    await h.allProcessed();
    assert.equal(await metrics(), before + 1);
    const rows = await h.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM messages WHERE provider_message_id = 'm_nowhere'`);
    assert.equal(rows[0].n, 0);
    assert.equal((await h.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM contacts WHERE handle = $1`, [w.guest]))[0].n, 0);
  });
});

describe('Messenger echoes', () => {
  test('an echo from another tool is an outbound message with source external and message.created; its redelivery writes nothing', async () => {
    const w = await h.world('messenger');
    await h.post(messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: 'm_guest', timestamp: Date.now() - 5000, text: 'Is the pool open?' }));
    await h.allProcessed();
    const echo = h.fixtureFor('messenger-echo', w, { 'mid.1457764197618:41d102a3e1ae206a40': 'm_echo_external' });
    // The documented example is from 2016: give it a time after the guest's message.
    const item = (echo as { entry: Array<{ messaging: Array<{ timestamp: number }> }> }).entry[0].messaging[0];
    item.timestamp = Date.now() - 1000;
    await h.post(echo);
    await h.post(echo);
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const [external, inbound] = await h.messagesOf(w, conversationId);
    assert.equal(inbound.direction, 'inbound');
    assert.deepEqual(
      { direction: external.direction, source: external.source, type: external.type, text: external.text },
      { direction: 'outbound', source: 'external', type: 'text', text: 'We will see you at 3pm' },
    );
    const created = await h.eventsOf(w, 'message.created');
    assert.deepEqual(created.map((e) => e.direction), ['inbound', 'outbound']);
    assert.equal(created[1].messageId, external.messageId);
    // An echo is not the guest writing: the conversation still needs a reply and the window is the guest's.
    const [conversation] = await h.conversationsOf(w);
    assert.equal(conversation.unreadCount, 1);
  });

  test('the echo of a message this service sent writes nothing new', async () => {
    const w = await h.world('messenger');
    await h.post(messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: 'm_hi', timestamp: Date.now() - 5000, text: 'hi' }));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const res = await h.reply(w, conversationId, 'Welcome to Hotel Sol!');
    assert.equal(res.statusCode, 202, res.body);
    const mid = await h.sentId((res.json() as { requestEventId: string }).requestEventId);
    await h.post(messengerEcho({ accountId: w.accountId, from: w.guest, mid, timestamp: Date.now(), text: 'Welcome to Hotel Sol!', appId: 1517776481860111 }));
    await h.allProcessed();
    const messages = await h.messagesOf(w, conversationId);
    assert.equal(messages.length, 2);
    assert.deepEqual(messages.map((m) => m.source), ['api', 'channel']);
    assert.deepEqual((await h.eventsOf(w, 'message.created')).map((e) => e.direction), ['inbound', 'outbound']);
  });
});

describe('Messenger echo racing its send', () => {
  test('an echo that arrives while its send is still in the provider call waits for the id, then writes nothing new', async () => {
    const w = await h.world('messenger');
    await h.post(messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: 'm_race_in', timestamp: Date.now() - 5000, text: 'hi' }));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const mid = `m_race_${w.guest}`;
    h.graph.answerMessageIds(mid);
    h.graph.setDelay(2_000);
    try {
      const res = await h.reply(w, conversationId, 'On my way');
      const { requestEventId } = res.json() as { requestEventId: string };
      await eventually(
        async () => (await h.db.query(`SELECT 1 FROM message_requests WHERE id = $1 AND dispatching_at IS NOT NULL`, [requestEventId])).length > 0,
        30_000,
        'the provider call under way',
      );
      await h.post(messengerEcho({ accountId: w.accountId, from: w.guest, mid, timestamp: Date.now(), text: 'On my way' }));
      await h.allProcessed();
    } finally {
      h.graph.setDelay(0);
    }
    const messages = await h.messagesOf(w, conversationId);
    assert.deepEqual(messages.map((m) => `${m.direction}/${m.source}`), ['outbound/api', 'inbound/channel']);
    assert.deepEqual((await h.eventsOf(w, 'message.created')).map((e) => e.direction), ['inbound', 'outbound']);
    // The echo's callback waited (an attempt failed while the send was under way) instead of storing a copy.
    const waited = await h.db.query(`SELECT 1 FROM jobs WHERE task = 'channels.process-callback' AND attempts > 1 AND last_error LIKE '%waits for a send under way%'`);
    assert.ok(waited.length > 0);
  });
});

describe('Messenger delivery and read watermarks', () => {
  test('delivery (mids and watermark) and read move our sends forward only, emit message.delivery.updated, and set readAt', async () => {
    const w = await h.world('messenger');
    await h.post(messengerTextMessage({ accountId: w.accountId, from: w.guest, mid: 'm_in', timestamp: Date.now() - 60_000, text: 'hello' }));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const first = (await h.reply(w, conversationId, 'First')).json() as { requestEventId: string; messageId: string };
    const firstMid = await h.sentId(first.requestEventId);
    const second = (await h.reply(w, conversationId, 'Second')).json() as { requestEventId: string; messageId: string };
    const secondMid = await h.sentId(second.requestEventId);
    const [secondRow] = await h.db.query<{ created_at: Date }>('SELECT created_at FROM message_requests WHERE id = $1', [second.requestEventId]);
    const [firstRow] = await h.db.query<{ created_at: Date }>('SELECT created_at FROM message_requests WHERE id = $1', [first.requestEventId]);

    // Delivered: the first by its mid, with a watermark before the second was created.
    await h.post(messengerDelivery({ accountId: w.accountId, from: w.guest, mids: [firstMid], watermark: firstRow.created_at.getTime() }));
    await h.allProcessed();
    const status = async () => Object.fromEntries((await h.messagesOf(w, conversationId)).filter((m) => m.direction === 'outbound').map((m) => [m.text, m.status]));
    assert.deepEqual(await status(), { First: 'delivered', Second: 'sent' });

    // Read up to the second: both read, readAt the time of the read.
    const readAt = Date.now() - 10;
    await h.post(messengerRead({ accountId: w.accountId, from: w.guest, timestamp: readAt, watermark: secondRow.created_at.getTime() + 1 }));
    await h.allProcessed();
    assert.deepEqual(await status(), { First: 'read', Second: 'read' });
    const outbound = (await h.messagesOf(w, conversationId)).filter((m) => m.direction === 'outbound');
    assert.ok(outbound.every((m) => m.readAt === new Date(readAt).toISOString()));

    // A late delivery and a redelivered read change nothing.
    await h.post(messengerDelivery({ accountId: w.accountId, from: w.guest, mids: [secondMid], watermark: secondRow.created_at.getTime() + 1 }));
    await h.post(messengerRead({ accountId: w.accountId, from: w.guest, timestamp: readAt, watermark: secondRow.created_at.getTime() + 1 }));
    await h.allProcessed();
    assert.deepEqual(await status(), { First: 'read', Second: 'read' });
    const updates = (await h.eventsOf(w, 'message.delivery.updated')).map((e) => `${e.requestEventId === first.requestEventId ? 'first' : 'second'}:${String(e.status)}`);
    assert.deepEqual(updates.filter((u) => !u.endsWith(':sent')).sort(), ['first:delivered', 'first:read', 'second:read']);
    assert.ok(updates.indexOf('first:delivered') < updates.indexOf('first:read'));
  });
});
