import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Stripe from 'stripe';
import { verifyWebhook, WebhookVerificationError } from '../../packages/client/src/verify.js';
import { USER_AGENT } from '../../src/webhooks/deliver.js';
import { emit } from '../../src/webhooks/events.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import {
  FULL_WEBHOOK_SCOPES,
  addKey,
  createSubscription,
  deliveryOf,
  emitEvent,
  gate,
  getDelivery,
  listDeliveries,
  waitForDelivery,
  type DeliveryBody,
} from '../fixtures/webhooks.js';

// The delivery path end to end: real outbox emit → dispatcher → signed POST to a real receiver on 127.0.0.1.

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

const ENVELOPE_KEYS = ['data', 'eventId', 'occurredAt', 'schemaVersion', 'tenantId', 'type'];
const stripe = new Stripe('sk_test_x');

describe('webhook delivery', () => {
  let app: TestApp;
  const receivers: Receiver[] = [];

  async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
    const r = await startReceiver(...args);
    receivers.push(r);
    return r;
  }

  before(async () => {
    app = await startTestApp({
      startWorkers: true,
      env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '30,30,30,30,30,30', WEBHOOK_ATTEMPT_TIMEOUT_MS: '5000' },
    });
  });
  after(async () => {
    await app.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  /** Requests the receiver got for one event id. */
  const requestsFor = (r: Receiver, eventId: string) => r.received.filter((entry) => entry.headers['x-service-event-id'] === eventId);

  test('an emitted event arrives signed, with the exact envelope, and the delivery reads delivered', async () => {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const hook = await receiver();
    const subscription = await createSubscription(app, key, { url: hook.url, events: ['message.created'] });
    const data = { messageId: 'msg_1', conversationId: 'conv_1', direction: 'inbound', channel: 'whatsapp', text: 'héllo ✓' };
    const emitted = await emitEvent(app, tenantId, 'message.created', data);
    assert.equal(emitted.deliveries, 1);

    const [request] = await eventually(async () => (requestsFor(hook, emitted.eventId).length > 0 ? requestsFor(hook, emitted.eventId) : undefined), 20_000, 'the delivery');
    const { headers, body } = request;
    assert.equal(headers['x-service-event-id'], emitted.eventId);
    assert.equal(headers['content-type'], 'application/json');
    assert.equal(headers['user-agent'], USER_AGENT);
    const signature = String(headers['x-service-signature']);
    const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(signature);
    assert.ok(match, `signature header ${signature}`);
    assert.ok(Math.abs(Number(match[1]) - Date.now() / 1000) < 300, 'timestamp is current unix seconds');

    // The exact envelope and nothing else.
    const envelope = JSON.parse(body) as Record<string, unknown>;
    assert.deepEqual(Object.keys(envelope).sort(), ENVELOPE_KEYS);
    assert.equal(envelope.eventId, emitted.eventId);
    assert.equal(envelope.type, 'message.created');
    assert.equal(envelope.schemaVersion, '1.0');
    assert.equal(envelope.tenantId, tenantId);
    assert.equal(typeof envelope.occurredAt, 'string');
    assert.equal(new Date(envelope.occurredAt as string).toISOString(), envelope.occurredAt);
    assert.deepEqual(envelope.data, data);

    // The SDK verifier and Stripe's (same scheme) both accept it; a wrong secret or a changed body does not.
    const verified = verifyWebhook(body, signature, subscription.secret);
    assert.deepEqual(verified, envelope);
    const viaStripe = stripe.webhooks.constructEvent(body, signature, subscription.secret, 300) as unknown as Record<string, unknown>;
    assert.deepEqual(viaStripe, envelope);
    assert.throws(() => verifyWebhook(body, signature, 'whsec_wrong'), WebhookVerificationError);
    assert.throws(() => verifyWebhook(body.replace('msg_1', 'msg_2'), signature, subscription.secret), WebhookVerificationError);
    assert.throws(() => stripe.webhooks.constructEvent(body, signature, 'whsec_wrong', 300));

    const listed = await eventually(async () => {
      const d = await deliveryOf(app, key, subscription.subscriptionId, emitted.eventId);
      return d?.status === 'delivered' ? d : undefined;
    }, 20_000, 'status delivered');
    const delivery = await getDelivery(app, key, subscription.subscriptionId, listed.deliveryId);
    assert.deepEqual(delivery, listed);
    assert.equal(delivery.status, 'delivered');
    assert.equal(delivery.httpStatus, 200);
    assert.equal(delivery.attempts, 1);
    assert.equal(delivery.eventId, emitted.eventId);
    assert.equal(delivery.subscriptionId, subscription.subscriptionId);
    assert.equal(delivery.eventType, 'message.created');
    assert.equal(typeof delivery.deliveredAt, 'string');
    assert.equal(new Date(delivery.deliveredAt!).toISOString(), delivery.deliveredAt);
    assert.equal('failureCode' in delivery, false);
    assert.equal('nextAttemptAt' in delivery, false, 'only pending deliveries have a next attempt');

    const attempts = await app.api(key, 'GET', `/webhooks/${subscription.subscriptionId}/deliveries/${delivery.deliveryId}/attempts`);
    assert.equal(attempts.statusCode, 200, attempts.body);
    const log = (attempts.json() as { attempts: Array<Record<string, unknown>> }).attempts;
    assert.equal(log.length, 1);
    assert.equal(log[0].httpStatus, 200);
    assert.equal(typeof log[0].attemptedAt, 'string');
    assert.equal(typeof log[0].durationMs, 'number');
    assert.equal('failureCode' in log[0], false);
    assert.equal(requestsFor(hook, emitted.eventId).length, 1);
  });

  test('fan-out: each subscription of the tenant for the type gets one delivery; others get nothing', async () => {
    const a = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const b = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const [first, second, otherType, otherTenant] = await Promise.all([receiver(), receiver(), receiver(), receiver()]);
    const subFirst = await createSubscription(app, a.key, { url: first.url, events: ['message.created', 'crm.opportunity.created'] });
    const subSecond = await createSubscription(app, a.key, { url: second.url, events: ['message.created'] });
    const subOtherType = await createSubscription(app, a.key, { url: otherType.url, events: ['message.delivery.updated'] });
    const subOtherTenant = await createSubscription(app, b.key, { url: otherTenant.url, events: ['message.created'] });
    // A disabled subscription for the type gets nothing either.
    const disabled = await receiver();
    const subDisabled = await createSubscription(app, a.key, { url: disabled.url, events: ['message.created'], active: false });

    const emitted = await emitEvent(app, a.tenantId, 'message.created', { messageId: 'fan', conversationId: 'c', direction: 'inbound', channel: 'webchat' });
    assert.equal(emitted.deliveries, 2);

    for (const [hook, sub] of [[first, subFirst], [second, subSecond]] as const) {
      const list = await listDeliveries(app, a.key, sub.subscriptionId);
      assert.equal(list.length, 1);
      assert.equal(list[0].eventId, emitted.eventId);
      await waitForDelivery(app, a.key, sub.subscriptionId, list[0].deliveryId, (d) => d.status === 'delivered', 'fan-out delivery');
      assert.equal(requestsFor(hook, emitted.eventId).length, 1);
      assert.equal(hook.received.length, 1);
    }
    assert.deepEqual(await listDeliveries(app, a.key, subOtherType.subscriptionId), []);
    assert.deepEqual(await listDeliveries(app, a.key, subDisabled.subscriptionId), []);
    assert.deepEqual(await listDeliveries(app, b.key, subOtherTenant.subscriptionId), []);
    assert.equal(otherType.received.length, 0);
    assert.equal(otherTenant.received.length, 0);
    assert.equal(disabled.received.length, 0);
  });

  test('an event emitted in a transaction that rolls back produces no delivery', async () => {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const hook = await receiver();
    const subscription = await createSubscription(app, key, { url: hook.url, events: ['conversation.handoff.updated'] });
    const { db, clock } = app.runtime.services;

    let rolledBack: string | undefined;
    await assert.rejects(
      db.transaction(async (tx) => {
        const event = await emit(tx, clock.now(), tenantId, 'conversation.handoff.updated', { conversationId: 'c1', caseId: 'k1', action: 'opened' });
        assert.equal(event.deliveries, 1, 'inside the transaction the delivery exists');
        rolledBack = event.eventId;
        throw new Error('the state change failed');
      }),
      /the state change failed/,
    );
    assert.ok(rolledBack);
    assert.equal((await db.query('SELECT 1 FROM webhook_events WHERE id = $1', [rolledBack])).length, 0);
    assert.equal((await db.query('SELECT 1 FROM webhook_deliveries WHERE event_id = $1', [rolledBack])).length, 0);

    // A committed emit to the same subscription is the barrier: once it arrived, the rolled-back one never will.
    const committed = await db.transaction((tx) =>
      emit(tx, clock.now(), tenantId, 'conversation.handoff.updated', { conversationId: 'c1', caseId: 'k1', action: 'resolved' }),
    );
    assert.equal(committed.deliveries, 1);
    await eventually(async () => requestsFor(hook, committed.eventId).length > 0, 20_000, 'the committed event');
    const deliveries = await listDeliveries(app, key, subscription.subscriptionId);
    assert.deepEqual(deliveries.map((d) => d.eventId), [committed.eventId]);
    assert.deepEqual(hook.eventIds(), [committed.eventId]);
  });

  test('a subscription whose owner key lacks the read scope at emit time gets no delivery', async () => {
    const { tenantId, key } = await app.tenantWithKey(['webhooks:write', 'crm:sales:read']);
    const owner = await addKey(app, tenantId, ['webhooks:write', 'crm:sales:read'], 'owner');
    const [downscoped, healthy] = await Promise.all([receiver(), receiver()]);
    const lost = await createSubscription(app, owner.key, { url: downscoped.url, events: ['crm.opportunity.created'] });
    const kept = await createSubscription(app, key, { url: healthy.url, events: ['crm.opportunity.created'] });
    await app.admin('PATCH', `/tenants/${tenantId}/api-keys/${owner.apiKeyId}`, { scopes: ['webhooks:write'] });

    const emitted = await emitEvent(app, tenantId, 'crm.opportunity.created', { opportunityId: 'o1', leadId: 'l1', revision: 1, stage: 'new', status: 'open' });
    assert.equal(emitted.deliveries, 1, 'only the subscription whose owner still holds crm:sales:read');
    assert.deepEqual(await listDeliveries(app, key, lost.subscriptionId), []);
    await eventually(async () => requestsFor(healthy, emitted.eventId).length > 0, 20_000, 'the healthy subscription');
    assert.equal(downscoped.received.length, 0);

    // A revoked owner key gets nothing either.
    await app.admin('POST', `/tenants/${tenantId}/api-keys/${owner.apiKeyId}/revoke`);
    const again = await emitEvent(app, tenantId, 'crm.opportunity.created', { opportunityId: 'o2', leadId: 'l1', revision: 1, stage: 'new', status: 'open' });
    assert.equal(again.deliveries, 1);
    await eventually(async () => requestsFor(healthy, again.eventId).length > 0, 20_000, 'the healthy subscription again');
    assert.equal(downscoped.received.length, 0);
    assert.deepEqual(
      (await listDeliveries(app, key, kept.subscriptionId)).map((d) => d.eventId),
      [again.eventId, emitted.eventId],
    );
  });

  test('rotate-secret: the next attempt is signed with the new secret only', async () => {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const rotated = gate();
    let firstSeen: () => void = () => undefined;
    const firstArrived = new Promise<void>((resolve) => {
      firstSeen = resolve;
    });
    // The first attempt is held until the secret is rotated, then fails; the retry is accepted.
    const hook = await receiver((_req, res) => {
      if (hook.received.length === 1) {
        firstSeen();
        void rotated.wait().then(() => res.writeHead(503).end('try again'));
      } else {
        res.writeHead(200).end('ok');
      }
    });
    const subscription = await createSubscription(app, key, { url: hook.url, events: ['message.delivery.updated'] });
    const oldSecret = subscription.secret;
    const emitted = await emitEvent(app, tenantId, 'message.delivery.updated', { requestEventId: 'req_1', status: 'delivered' });

    let newSecret: string;
    try {
      await firstArrived;
      const response = await app.api(key, 'POST', `/webhooks/${subscription.subscriptionId}/rotate-secret`);
      assert.equal(response.statusCode, 200, response.body);
      newSecret = (response.json() as { secret: string }).secret;
      assert.notEqual(newSecret, oldSecret);
    } finally {
      rotated.open();
    }

    const deliveryId = (await eventually(() => deliveryOf(app, key, subscription.subscriptionId, emitted.eventId), 10_000, 'delivery row'))!.deliveryId;
    const delivery: DeliveryBody = await waitForDelivery(app, key, subscription.subscriptionId, deliveryId, (d) => d.status === 'delivered', 'the retry');
    assert.equal(delivery.attempts, 2);
    const [before, after] = requestsFor(hook, emitted.eventId);
    assert.equal(requestsFor(hook, emitted.eventId).length, 2);
    assert.equal(after.body, before.body, 'the same event body is resent');

    const sigBefore = String(before.headers['x-service-signature']);
    const sigAfter = String(after.headers['x-service-signature']);
    assert.equal(verifyWebhook(before.body, sigBefore, oldSecret).eventId, emitted.eventId);
    assert.throws(() => verifyWebhook(before.body, sigBefore, newSecret), WebhookVerificationError);
    assert.equal(verifyWebhook(after.body, sigAfter, newSecret).eventId, emitted.eventId);
    assert.throws(() => verifyWebhook(after.body, sigAfter, oldSecret), (error: unknown) => {
      assert.ok(error instanceof WebhookVerificationError);
      assert.equal(error.reason, 'signature_mismatch');
      return true;
    });
    assert.throws(() => stripe.webhooks.constructEvent(after.body, sigAfter, oldSecret, 300));
    stripe.webhooks.constructEvent(after.body, sigAfter, newSecret, 300);
  });
});
