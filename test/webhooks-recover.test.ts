import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';
import { FULL_WEBHOOK_SCOPES, createSubscription, emitEvent, expectError, listDeliveries, waitForDelivery } from './fixtures/webhooks.js';

// POST /webhooks/{id}/recover (decisions 6.3): failed deliveries of a window start a new cycle, same event id.

let app: TestApp;
before(async () => {
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '1,1,1,1,1,1' } });
});
after(() => app.close());

test('recover restarts the failed deliveries of the window with the same event ids', async () => {
  let up = false;
  const receiver = await startReceiver((_req, res) => res.writeHead(up ? 200 : 500).end());
  try {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const subscription = await createSubscription(app, key, { url: receiver.url, events: ['message.created'] });
    const before = new Date().toISOString();
    const events = [await emitEvent(app, tenantId, 'message.created'), await emitEvent(app, tenantId, 'message.created')];
    const deliveries = await listDeliveries(app, key, subscription.subscriptionId);
    assert.equal(deliveries.length, 2);
    for (const delivery of deliveries) await waitForDelivery(app, key, subscription.subscriptionId, delivery.deliveryId, (d) => d.status === 'failed', 'failed after the cycle');

    const empty = await app.api(key, 'POST', `/webhooks/${subscription.subscriptionId}/recover`, { since: '2020-01-01T00:00:00.000Z' });
    expectError(empty, 400, 'M2M_INVALID_REQUEST');
    const earlier = await app.api(key, 'POST', `/webhooks/${subscription.subscriptionId}/recover`, { since: new Date(Date.now() - 60_000 * 60).toISOString(), until: before });
    assert.equal(earlier.statusCode, 202, earlier.body);
    assert.deepEqual(earlier.json(), { recovered: 0 }, 'events outside the window stay failed');

    up = true;
    const res = await app.api(key, 'POST', `/webhooks/${subscription.subscriptionId}/recover`, { since: before });
    assert.equal(res.statusCode, 202, res.body);
    assert.deepEqual(res.json(), { recovered: 2 });
    for (const delivery of deliveries) {
      const done = await waitForDelivery(app, key, subscription.subscriptionId, delivery.deliveryId, (d) => d.status === 'delivered', 'delivered after recover');
      assert.equal(done.eventId, delivery.eventId);
      assert.equal(done.attempts, 8, 'seven failed attempts and the recovered one');
    }
    const ids = new Set(receiver.received.map((r) => r.headers['x-service-event-id']));
    assert.deepEqual([...ids].sort(), events.map((e) => e.eventId).sort(), 'the same event ids were sent again');
    assert.deepEqual((await app.api(key, 'POST', `/webhooks/${subscription.subscriptionId}/recover`, { since: before })).json(), { recovered: 0 }, 'delivered ones are not restarted');
  } finally {
    await receiver.close();
  }
});
