import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../helpers/app.js';
import { messengerEcho, messengerTextMessage } from '../helpers/fake-graph.js';
import { startMetaWorld, type MetaWorld, type MetaWorldHarness } from '../helpers/meta-world.js';

// Instagram end to end: the `instagram` object's documented callbacks (messages, attachments, postbacks,
// reactions, echoes, messaging_seen) through the real server, and replies through POST /{ig-id}/messages of the
// fake Graph API.

let h: MetaWorldHarness;

before(async () => {
  h = await startMetaWorld({ SEND_MAX_ATTEMPTS: '4' });
});
after(async () => {
  await h.close();
});

const igText = (w: MetaWorld, mid: string, text: string, timestamp = Date.now()) =>
  messengerTextMessage({ object: 'instagram', accountId: w.accountId, from: w.guest, mid, timestamp, text });

describe('Instagram channels and inbound', () => {
  test('created with instagramAccountId and accessToken (sealed); GET /channels shows it connected', async () => {
    const w = await h.world('instagram');
    const list = await h.app.api(w.key, 'GET', '/channels');
    assert.equal(list.statusCode, 200, list.body);
    assert.ok(!list.body.includes(w.token));
    const [channel] = (list.json() as { channels: Array<{ kind: string; provider: string; connection: { status: string } }> }).channels;
    assert.deepEqual({ kind: channel.kind, provider: channel.provider, status: channel.connection.status }, { kind: 'instagram', provider: 'instagram', status: 'connected' });
    const [row] = await h.db.query<{ connection: unknown; connection_secret: string }>('SELECT connection, connection_secret FROM channels WHERE id = $1', [w.channelId]);
    assert.deepEqual(row.connection, { instagramAccountId: w.accountId });
    assert.ok(!row.connection_secret.includes(w.token));
  });

  test('documented messages: text, video attachment (downloaded), postback, reaction; contact by IGSID named from its username', async () => {
    const w = await h.world('instagram');
    h.graph.setProfile(w.guest, { username: 'ana.travels' });
    const bytes = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), Buffer.alloc(3000, 1)]);
    h.graph.addCdnFile({ name: 'ig_messaging_cdn/', bytes, mimeType: 'video/mp4' });
    for (const name of ['instagram-text', 'instagram-attachment', 'instagram-postback', 'instagram-reaction']) await h.post(h.fixtureFor(name, w));
    await h.post(h.fixtureFor('instagram-text', w));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const messages = await eventually(
      async () => {
        const all = await h.messagesOf(w, conversationId);
        return all.every((m) => m.media?.status !== 'pending') ? all : undefined;
      },
      30_000,
      'the video downloaded',
    );
    assert.deepEqual(messages.map((m) => m.type).sort(), ['interactive_reply', 'reaction', 'text', 'video']);
    assert.equal(messages.find((m) => m.type === 'text')?.text, 'Do you have parking?');
    assert.deepEqual(messages.find((m) => m.type === 'video')?.media, { contentType: 'video/mp4', sizeBytes: bytes.length, status: 'ready' });
    assert.deepEqual(messages.find((m) => m.type === 'interactive_reply')?.interactive, { kind: 'button_reply', id: 'OPENING_HOURS', title: 'Opening hours' });
    assert.equal(messages.find((m) => m.type === 'reaction')?.reaction?.emoji, '\u2764\ufe0f');
    const contact = await eventually(async () => (await h.contactsOf(w)).find((c) => c.name !== null), 30_000, 'the profile');
    assert.deepEqual({ handle: contact.handle, name: contact.name }, { handle: w.guest, name: 'ana.travels' });
    assert.equal(h.graph.requests.find((r) => r.path.endsWith(`/${w.guest}`))?.query.fields, 'name,username');
    const created = await h.eventsOf(w, 'message.created');
    assert.equal(created.length, 4);
    assert.ok(created.every((e) => e.channel === 'instagram' && e.direction === 'inbound'));
  });
});

describe('Instagram echoes and messaging_seen', () => {
  test('an echo from the Instagram app is stored as external; the echo of our own reply writes nothing', async () => {
    const w = await h.world('instagram');
    await h.post(igText(w, 'ig_in_1', 'Hi!', Date.now() - 10_000));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const external = h.fixtureFor('instagram-echo', w) as { entry: Array<{ messaging: Array<{ timestamp: number }> }> };
    external.entry[0].messaging[0].timestamp = Date.now() - 5_000;
    await h.post(external);
    const res = await h.reply(w, conversationId, 'Hello from the hotel');
    assert.equal(res.statusCode, 202, res.body);
    const mid = await h.sentId((res.json() as { requestEventId: string }).requestEventId);
    await h.post(messengerEcho({ object: 'instagram', accountId: w.accountId, from: w.guest, mid, timestamp: Date.now(), text: 'Hello from the hotel' }));
    await h.post(external);
    await h.allProcessed();
    const messages = await h.messagesOf(w, conversationId);
    assert.deepEqual(
      messages.map((m) => `${m.direction}/${m.source}/${m.text}`),
      ['outbound/api/Hello from the hotel', 'outbound/external/Yes, free parking for guests', 'inbound/channel/Hi!'],
    );
    assert.deepEqual((await h.eventsOf(w, 'message.created')).map((e) => e.direction), ['inbound', 'outbound', 'outbound']);
  });

  test('messaging_seen names the message read: it and every earlier send are read (readAt), later ones not; forward only', async () => {
    const w = await h.world('instagram');
    await h.post(igText(w, 'ig_in_2', 'Hello', Date.now() - 10_000));
    await h.allProcessed();
    const conversationId = await h.onlyConversation(w);
    const ids: string[] = [];
    const mids: string[] = [];
    for (const text of ['One', 'Two', 'Three']) {
      const { requestEventId } = (await h.reply(w, conversationId, text)).json() as { requestEventId: string };
      ids.push(requestEventId);
      mids.push(await h.sentId(requestEventId));
    }
    const seenAt = Date.now() - 5;
    const seen = h.fixtureFor('instagram-seen', w, { aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDA1ODIyMzA0OTE2: mids[1] }) as { entry: Array<{ messaging: Array<{ timestamp: number }> }> };
    seen.entry[0].messaging[0].timestamp = seenAt;
    await h.post(seen);
    await h.post(seen);
    await h.allProcessed();
    const statuses = Object.fromEntries((await h.messagesOf(w, conversationId)).filter((m) => m.direction === 'outbound').map((m) => [m.text, `${m.status}${m.readAt ? `@${m.readAt}` : ''}`]));
    const at = new Date(seenAt).toISOString();
    assert.deepEqual(statuses, { One: `read@${at}`, Two: `read@${at}`, Three: 'sent' });
    const reads = (await h.eventsOf(w, 'message.delivery.updated')).filter((e) => e.status === 'read').map((e) => e.requestEventId);
    assert.deepEqual(reads.sort(), [ids[0], ids[1]].sort());
  });
});

describe('Instagram sends', () => {
  test('a reply goes to POST /{ig-id}/messages with the account token; the window is refused up front; errors are meta_<code>', async () => {
    const w = await h.world('instagram');
    h.graph.setProfile(w.guest, { name: 'Ana' });
    await h.post(igText(w, 'ig_in_3', 'Parking?', Date.now() - 1000));
    await h.allProcessed();
    await eventually(async () => (await h.contactsOf(w))[0]?.name === 'Ana', 30_000, 'the profile');
    const conversationId = await h.onlyConversation(w);
    const ok = await h.reply(w, conversationId, 'Yes, free for guests 🚗');
    assert.equal((await h.finalStatus(w, (ok.json() as { requestEventId: string }).requestEventId)).status, 'sent');
    const [sent] = h.graph.sent(w.accountId, 'messages');
    assert.deepEqual(sent.json, { recipient: { id: w.guest }, messaging_type: 'RESPONSE', message: { text: 'Yes, free for guests 🚗' } });
    assert.equal(sent.headers.authorization, `Bearer ${w.token}`);

    h.graph.failNext(1, { status: 400, code: 551, message: 'This person isn\u2019t available right now.' });
    const refused = await h.reply(w, conversationId, 'Hello?');
    assert.equal((await h.finalStatus(w, (refused.json() as { requestEventId: string }).requestEventId)).error?.code, 'meta_551');

    const old = await h.world('instagram');
    await h.post(igText(old, 'ig_in_old', 'Hi', Date.now() - 30 * 3600_000));
    await h.allProcessed();
    const late = await h.reply(old, await h.onlyConversation(old), 'Sorry for the delay');
    assert.equal(late.statusCode, 409, late.body);
    assert.equal((late.json() as { error: { details: { reason: string; channel: string } } }).error.details.channel, 'instagram');
    assert.equal(h.graph.sent(old.accountId, 'messages').length, 0);
  });
});
