import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { FULL_WEBHOOK_SCOPES, type SubscriptionBody, createSubscription, emitEvent, issuesOf, listDeliveries, waitForDelivery } from '../fixtures/webhooks.js';

// Endpoint health, auto-disable and throttling of subscriptions (decisions 6.3), through the real server and
// worker. Retries 100 ms apart and WEBHOOK_AUTO_DISABLE_AFTER_MS = 250 make "failing for long enough" take
// about half a second instead of five days; the 10-failure floor is the product's own.

type SubscriptionView = SubscriptionBody;

let app: TestApp;
before(async () => {
  app = await startTestApp({
    startWorkers: true,
    env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '100,100,100,100,100,100', WEBHOOK_AUTO_DISABLE_AFTER_MS: '250' },
  });
});
after(() => app.close());

async function getSubscription(key: string, id: string): Promise<SubscriptionView> {
  const response = await app.api(key, 'GET', `/webhooks/${id}`);
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as SubscriptionView;
}

test('health counts consecutive failures with the last failure and its code; a success resets the count', async () => {
  let up = false;
  const receiver = await startReceiver((_req, res) => res.writeHead(up ? 204 : 503).end());
  try {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const created = await createSubscription(app, key, { url: receiver.url, events: ['message.created'] });
    assert.deepEqual(created.health, { consecutiveFailures: 0 });

    await emitEvent(app, tenantId, 'message.created');
    const [failing] = await listDeliveries(app, key, created.subscriptionId);
    await waitForDelivery(app, key, created.subscriptionId, failing.deliveryId, (d) => d.status === 'failed', 'a failed cycle', 30_000);
    const afterFailures = await getSubscription(key, created.subscriptionId);
    assert.equal(afterFailures.health.consecutiveFailures, 7, 'every attempt of the cycle failed');
    assert.equal(afterFailures.health.lastFailureCode, 'http_status');
    assert.ok(afterFailures.health.lastFailureAt);
    assert.equal(afterFailures.health.lastSuccessAt, undefined);
    assert.equal(afterFailures.active, true, 'seven failures are below the floor of ten');
    assert.deepEqual(Object.keys(afterFailures.health).sort(), ['consecutiveFailures', 'lastFailureAt', 'lastFailureCode']);

    up = true;
    const { eventId } = await emitEvent(app, tenantId, 'message.created');
    const delivered = (await listDeliveries(app, key, created.subscriptionId)).find((d) => d.eventId === eventId)!;
    await waitForDelivery(app, key, created.subscriptionId, delivered.deliveryId, (d) => d.status === 'delivered', 'delivered');
    const listed = (await app.api(key, 'GET', '/webhooks')).json() as { subscriptions: SubscriptionView[] };
    const healthy = listed.subscriptions.find((s) => s.subscriptionId === created.subscriptionId)!;
    assert.equal(healthy.health.consecutiveFailures, 0);
    assert.ok(healthy.health.lastSuccessAt && healthy.health.lastSuccessAt >= afterFailures.health.lastFailureAt!);
    assert.equal(healthy.health.lastFailureAt, afterFailures.health.lastFailureAt, 'the last failure is kept');
  } finally {
    await receiver.close();
  }
});

test('a subscription failing every attempt for long enough is disabled, its pending deliveries canceled, and the event emitted', async () => {
  const failing = await startReceiver((_req, res) => res.writeHead(500).end());
  const watcher = await startReceiver((_req, res) => res.writeHead(200).end());
  try {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const doomed = await createSubscription(app, key, { url: failing.url, events: ['message.created'] });
    const observer = await createSubscription(app, key, { url: watcher.url, events: ['webhook.subscription.disabled'] });
    // Two deliveries of 7 attempts each: the 10th failure (past 250 ms of failing) comes while both still have attempts left.
    await emitEvent(app, tenantId, 'message.created');
    await emitEvent(app, tenantId, 'message.created');

    const disabled = await eventually(async () => {
      const view = await getSubscription(key, doomed.subscriptionId);
      return view.active ? undefined : view;
    }, 30_000, 'the subscription disabled');
    assert.equal(disabled.disabledReason, 'failing');
    assert.ok(disabled.health.consecutiveFailures >= 10, `${disabled.health.consecutiveFailures} failures`);
    assert.ok(disabled.health.consecutiveFailures < 14, 'disabled before every attempt was made');

    const deliveries = await listDeliveries(app, key, doomed.subscriptionId);
    assert.equal(deliveries.length, 2);
    assert.ok(deliveries.every((d) => d.status === 'canceled' || d.status === 'failed'), JSON.stringify(deliveries.map((d) => d.status)));
    assert.ok(deliveries.some((d) => d.status === 'canceled'), 'the pending delivery was canceled');
    const attemptsMade = failing.received.length;
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal(failing.received.length, attemptsMade, 'nothing is sent after the disable');

    // The event: in the feed, and delivered to another subscription of the tenant.
    // The feed shows an event once no transaction that began before it commits is still running (the horizon):
    // another test's transaction may hold it back for a moment.
    const events = await eventually(async () => {
      const feed = await app.api(key, 'GET', '/events?types=webhook.subscription.disabled');
      assert.equal(feed.statusCode, 200, feed.body);
      const listed = (feed.json() as { events: Array<{ type: string; data: unknown }> }).events;
      return listed.length > 0 ? listed : undefined;
    }, 10_000, 'the disabled event in the feed');
    assert.equal(events.length, 1);
    assert.deepEqual(events[0].data, { subscriptionId: doomed.subscriptionId, reason: 'failing' });
    await eventually(async () => watcher.received.length === 1, 10_000, 'the disabled event delivered');
    assert.deepEqual(JSON.parse(watcher.received[0].body).data, { subscriptionId: doomed.subscriptionId, reason: 'failing' });
    assert.equal((await getSubscription(key, observer.subscriptionId)).active, true);

    // Enabling again clears the reason; it is not disabled again by the failures of before.
    const enabled = await app.api(key, 'PATCH', `/webhooks/${doomed.subscriptionId}`, { active: true });
    assert.equal(enabled.statusCode, 200, enabled.body);
    const view = enabled.json() as SubscriptionView;
    assert.equal(view.active, true);
    assert.equal(view.disabledReason, undefined);
    assert.ok(!('disabledReason' in view));
  } finally {
    await failing.close();
    await watcher.close();
  }
});

test('rateLimitPerSecond is validated, returned, and removable', async () => {
  const { key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
  for (const bad of [0, 10_001, 1.5, '5']) {
    const issues = issuesOf(await app.api(key, 'POST', '/webhooks', { url: 'http://127.0.0.1:9/x', events: ['message.created'], rateLimitPerSecond: bad }));
    assert.ok(issues.some((i) => i.path.includes('rateLimitPerSecond')), JSON.stringify(issues));
  }
  const created = await createSubscription(app, key, { url: 'http://127.0.0.1:9/x', events: ['message.created'], rateLimitPerSecond: 5 });
  assert.equal(created.rateLimitPerSecond, 5);
  const changed = (await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { rateLimitPerSecond: 10_000 })).json() as SubscriptionView;
  assert.equal(changed.rateLimitPerSecond, 10_000);
  const removed = await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { rateLimitPerSecond: null });
  assert.equal(removed.statusCode, 200, removed.body);
  assert.ok(!('rateLimitPerSecond' in (removed.json() as object)));
});

test('a rate-limited subscription gets its deliveries spaced, while another subscription is not held up', async () => {
  const slow = await startReceiver((_req, res) => res.writeHead(200).end());
  const fast = await startReceiver((_req, res) => res.writeHead(200).end());
  try {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const throttled = await app.api(key, 'POST', '/webhooks', { url: slow.url, events: ['message.created'], rateLimitPerSecond: 2 });
    assert.equal(throttled.statusCode, 201, throttled.body);
    const throttledId = (throttled.json() as SubscriptionView).subscriptionId;
    await createSubscription(app, key, { url: fast.url, events: ['message.created'] });
    for (let i = 0; i < 6; i++) await emitEvent(app, tenantId, 'message.created');

    await eventually(async () => slow.received.length >= 6, 30_000, 'six throttled deliveries');
    assert.equal(fast.received.length, 6);
    const slowAt = slow.received.map((r) => r.at);
    // Six deliveries at two a second: the last at least 2.5 s after the first (2 s allows for send-time jitter).
    assert.ok(slowAt[5] - slowAt[0] >= 2_000, `six deliveries at 2/s took ${slowAt[5] - slowAt[0]} ms`);
    const fastLast = Math.max(...fast.received.map((r) => r.at));
    assert.ok(fastLast < slowAt[2], 'the other subscription received everything before the throttled one was half done');
    assert.equal(new Set(slow.eventIds()).size, 6, 'nothing dropped or repeated');
    // The receiver sees a request before its outcome commits: wait for the last one.
    const statuses = async () => (await listDeliveries(app, key, throttledId)).map((d) => d.status);
    await eventually(async () => (await statuses()).every((status) => status === 'delivered'), 10_000, 'six outcomes committed');
    assert.deepEqual(await statuses(), Array(6).fill('delivered'));
  } finally {
    await slow.close();
    await fast.close();
  }
});

test('two workers on one database keep to one subscription’s rate together', { skip: !process.env.DATABASE_URL && 'needs two nodes on one PostgreSQL database' }, async () => {
  const second = await startTestApp({ startWorkers: true, sameDatabaseAs: app, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
  const receiver = await startReceiver((_req, res) => res.writeHead(200).end());
  try {
    const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    await createSubscription(app, key, { url: receiver.url, events: ['message.created'], rateLimitPerSecond: 2 });
    for (let i = 0; i < 6; i++) await emitEvent(app, tenantId, 'message.created');
    await eventually(async () => receiver.received.length >= 6, 30_000, 'six throttled deliveries');
    const at = receiver.received.map((r) => r.at);
    assert.ok(at[5] - at[0] >= 2_000, `six deliveries at 2/s over two workers took ${at[5] - at[0]} ms`);
    assert.equal(new Set(receiver.eventIds()).size, 6);
  } finally {
    await receiver.close();
    await second.close();
  }
});
