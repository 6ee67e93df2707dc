import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { M2MClient, signWebhook } from '../../packages/client/src/index.js';
import { createAutoReplier, type Outcome } from '../../packages/client/examples/auto-reply.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { inbound } from '../helpers/inbox.js';

// The spec's automatic-reply integration, end to end: the example receiver (packages/client/examples/auto-reply.ts)
// gets real signed deliveries from a real subscription, reads the message through the SDK and replies.

let app: TestApp;
let replier: ReturnType<typeof createAutoReplier>;
let replierUrl: string;
const outcomes: Outcome[] = [];
let world: { tenantId: string; key: string; channelId: string; secret: string; client: M2MClient };

before(async () => {
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '50,50,50,50,50,50' } });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}/m2m/v1`;
  const tenant = await app.tenantWithKey(['webhooks:write', 'conversations:write', 'messages:read']);
  const channelId = (await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp' })).channelId;
  const client = new M2MClient({ apiKey: tenant.key, baseUrl });

  const subscription = await client.webhooks.create({ url: 'http://127.0.0.1:9/placeholder', events: ['message.created'] });
  replier = createAutoReplier({ client, secret: subscription.secret!, compose: (message) => `Re: ${message.text}`, onOutcome: (outcome) => outcomes.push(outcome) });
  await new Promise<void>((resolve) => replier.listen(0, '127.0.0.1', resolve));
  replierUrl = `http://127.0.0.1:${(replier.address() as AddressInfo).port}/hook`;
  await client.webhooks.update({ subscriptionId: subscription.subscriptionId, url: replierUrl });
  world = { ...tenant, channelId, secret: subscription.secret!, client };
});
after(async () => {
  replier.closeAllConnections();
  await new Promise<void>((resolve) => replier.close(() => resolve()));
  await app.close();
});

async function outbound(conversationId: string) {
  const page = await world.client.conversations.messages.list({ conversationId, direction: 'outbound' });
  return page.messages;
}

/** Sends the event's exact stored bytes to a receiver, signed as a delivery is (a redelivery). */
async function redeliver(url: string, eventId: string): Promise<number> {
  const [row] = await app.runtime.services.db.query<{ body: string }>('SELECT body FROM webhook_events WHERE id = $1', [eventId]);
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-signature': signWebhook(world.secret, Math.floor(Date.now() / 1000), row.body) }, body: row.body });
  return res.status;
}

test('one inbound message gets exactly one reply; redeliveries and its own outbound event get none', async () => {
  const guest = await inbound(app, world.tenantId, world.channelId, { name: 'Ana', phone: '+525540000001' }, 'Is breakfast included?');
  const replied = await eventually(async () => outcomes.find((o) => o.action === 'replied'), 15_000, 'the reply');
  assert.equal(replied.action === 'replied' && replied.messageId, guest.messageId);

  // Its own reply comes back as an outbound message.created, which it ignores.
  await eventually(async () => outcomes.some((o) => o.action === 'ignored'), 15_000, 'the outbound event');
  const messages = await outbound(guest.conversationId);
  assert.equal(messages.length, 1);
  assert.equal(messages[0].text, 'Re: Is breakfast included?');

  // The same event delivered again: the stored event id answers it.
  assert.equal(await redeliver(replierUrl, replied.eventId), 200);
  assert.equal(outcomes.at(-1)?.action, 'duplicate');

  // A second replica that never saw the event (empty store): it replies again with the same Idempotency-Key and
  // the API replays the first answer, so there is still one reply.
  const replica = createAutoReplier({ client: world.client, secret: world.secret, compose: (message) => `Re: ${message.text}`, onOutcome: (outcome) => outcomes.push(outcome) });
  await new Promise<void>((resolve) => replica.listen(0, '127.0.0.1', resolve));
  try {
    assert.equal(await redeliver(`http://127.0.0.1:${(replica.address() as AddressInfo).port}/hook`, replied.eventId), 200);
  } finally {
    replica.closeAllConnections();
    await new Promise<void>((resolve) => replica.close(() => resolve()));
  }
  // It acknowledged at once; its answer follows.
  const again = await eventually(async () => (outcomes.length === 4 ? outcomes.at(-1) : undefined), 15_000, 'the replica\'s outcome');
  assert.equal(again?.action, 'replied');
  assert.equal(again?.action === 'replied' && again.replyId, replied.action === 'replied' && replied.replyId, 'the replayed answer');
  assert.equal((await outbound(guest.conversationId)).length, 1);

  // A forged delivery is refused before anything is read.
  const forged = await fetch(replierUrl, { method: 'POST', headers: { 'x-service-signature': signWebhook('whsec_wrong', Math.floor(Date.now() / 1000), '{}') }, body: '{}' });
  assert.equal(forged.status, 400);

  // Only one reply was ever sent, and every outcome so far is accounted for.
  assert.deepEqual(outcomes.map((o) => o.action).sort(), ['duplicate', 'ignored', 'replied', 'replied']);
  const ignored = outcomes.find((o) => o.action === 'ignored');
  const [row] = await app.runtime.services.db.query<{ body: string }>('SELECT body FROM webhook_events WHERE id = $1', [ignored!.eventId]);
  assert.equal(JSON.parse(row.body).data.direction, 'outbound');
});

test('it acknowledges before replying, retries a failure after acknowledging, and refuses when full so the sender keeps the event', async () => {
  const first = await inbound(app, world.tenantId, world.channelId, { name: 'Bo', phone: '+525540000002' }, 'Late check-out?');
  const second = await inbound(app, world.tenantId, world.channelId, { name: 'Cy', phone: '+525540000003' }, 'Parking?');
  const [one, two] = await Promise.all(
    [first, second].map((guest) => eventually(async () => outcomes.find((o) => o.action === 'replied' && o.messageId === guest.messageId), 15_000, 'the reply')),
  );

  // A replica whose answer waits on a gate and fails the first time, handling one event at a time and holding one.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let calls = 0;
  const seen: Outcome[] = [];
  const replica = createAutoReplier({
    client: world.client,
    secret: world.secret,
    concurrency: 1,
    maxPending: 1,
    retryDelaysMs: [10],
    compose: async (message) => {
      calls += 1;
      await gate;
      if (calls === 1) throw new Error('the knowledge service is down');
      return `Re: ${message.text}`;
    },
    onOutcome: (outcome) => seen.push(outcome),
  });
  await new Promise<void>((resolve) => replica.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(replica.address() as AddressInfo).port}/hook`;
  try {
    // Acknowledged while its answer is still waiting.
    assert.equal(await redeliver(url, one.eventId), 200);
    assert.equal(replica.pending(), 1);
    assert.equal(seen.length, 0);
    // Already accepted: a duplicate. Full: 503, so the sender keeps the second event and retries it.
    assert.equal(await redeliver(url, one.eventId), 200);
    assert.equal(seen.at(-1)?.action, 'duplicate');
    assert.equal(await redeliver(url, two.eventId), 503);

    // The first attempt fails after the 2xx: it is tried again and replies, with the event's key (one reply).
    release();
    assert.deepEqual(await replica.idle(15_000), []);
    assert.equal(calls, 2);
    const replied = seen.at(-1);
    assert.equal(replied?.action, 'replied');
    assert.equal(replied?.action === 'replied' && replied.replyId, one.action === 'replied' && one.replyId, 'the replayed answer');
    assert.equal((await outbound(first.conversationId)).length, 1);

    // With room again, the second event is accepted.
    assert.equal(await redeliver(url, two.eventId), 200);
    assert.deepEqual(await replica.idle(15_000), []);
    assert.equal(seen.at(-1)?.action, 'replied');
    assert.equal((await outbound(second.conversationId)).length, 1);
  } finally {
    replica.closeAllConnections();
    await new Promise<void>((resolve) => replica.close(() => resolve()));
  }
});
