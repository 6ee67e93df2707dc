import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { FULL_WEBHOOK_SCOPES, createSubscription, emitEvent, expectError, listDeliveries, waitForDelivery } from '../fixtures/webhooks.js';

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

test('recover goes through a large window in batches, each delivery once, and leaves the rest of the subscription alone', async () => {
  const receiver = await startReceiver((_req, res) => res.writeHead(200).end());
  try {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const subscription = await createSubscription(app, key, { url: receiver.url, events: ['message.created'] });
    const db = app.runtime.services.db;
    const since = new Date(Date.now() - 60 * 60 * 1000);
    // 1,203 failed deliveries in the window (three batches and a bit), every third row of the range delivered
    // instead, and 7 failed ones before the window, all written straight into the tables.
    const seed = async (prefix: string, count: number, at: Date, status: (i: number) => string) => {
      await db.query(
        `INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at)
         SELECT $1 || i, $2, 'message.created', $3::timestamptz + i * interval '1 millisecond', '{}', $3::timestamptz + i * interval '1 millisecond'
         FROM generate_series(1, $4::int) AS i`,
        [`evt_${prefix}_`, tenantId, at, count],
      );
      const statuses = Array.from({ length: count }, (_, i) => status(i + 1));
      await db.query(
        `INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, attempts, cycle_attempts, completed_at, created_at, updated_at)
         SELECT $1 || i, $2, $3 || i, 'message.created', $4, s.status, 7, 7, $5::timestamptz + i * interval '1 millisecond',
                $5::timestamptz + i * interval '1 millisecond', $5::timestamptz + i * interval '1 millisecond'
         FROM unnest($6::text[]) WITH ORDINALITY AS s(status, i)`,
        [`dlv_${prefix}_`, tenantId, `evt_${prefix}_`, subscription.subscriptionId, at, statuses],
      );
    };
    const failedInWindow = 1_203;
    const total = Math.ceil((failedInWindow * 3) / 2);
    let failed = 0;
    await seed('in', total, new Date(since.getTime() + 1_000), (i) => (i % 3 === 0 || failed >= failedInWindow ? 'delivered' : (failed++, 'failed')));
    assert.equal(failed, failedInWindow);
    await seed('before', 7, new Date(since.getTime() - 60_000), () => 'failed');

    const res = await app.api(key, 'POST', `/webhooks/${subscription.subscriptionId}/recover`, { since: since.toISOString() });
    assert.equal(res.statusCode, 202, res.body);
    assert.deepEqual(res.json(), { recovered: failedInWindow });
    const counts = await db.query<{ prefix: string; status: string; n: number }>(
      `SELECT split_part(id, '_', 2) AS prefix, CASE WHEN status = 'delivered' AND attempts = 7 THEN 'was delivered' WHEN status = 'failed' THEN 'failed' ELSE 'restarted' END AS status,
              count(*)::int AS n
       FROM webhook_deliveries WHERE subscription_id = $1 GROUP BY 1, 2 ORDER BY 1, 2`,
      [subscription.subscriptionId],
    );
    assert.deepEqual(counts, [
      { prefix: 'before', status: 'failed', n: 7 },
      { prefix: 'in', status: 'restarted', n: failedInWindow },
      { prefix: 'in', status: 'was delivered', n: total - failedInWindow },
    ]);
    const again = await app.api(key, 'POST', `/webhooks/${subscription.subscriptionId}/recover`, { since: since.toISOString() });
    assert.deepEqual(again.json(), { recovered: 0 }, 'nothing failed is left in the window');
  } finally {
    await receiver.close();
  }
});
