import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { ManualClock } from '../../src/clock.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import {
  FULL_WEBHOOK_SCOPES,
  addKey,
  createSubscription,
  deliveryOf,
  deliveryRowOf,
  emitEvent,
  expectError,
  gate,
  getDelivery,
  listDeliveries,
  settle,
  waitForDelivery,
  type DeliveryBody,
} from '../fixtures/webhooks.js';

// Receiver faults, the retry cycle, manual retry, cancellation (key revoked or downscoped, subscription
// disabled or deleted) and retention. Every receiver is a real HTTP server on 127.0.0.1.

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

const receivers: Receiver[] = [];
async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}
after(async () => {
  await Promise.all(receivers.map((r) => r.close()));
});

const requestsFor = (r: Receiver, eventId: string) => r.received.filter((entry) => entry.headers['x-service-event-id'] === eventId);
const ok = (_req: http.IncomingMessage, res: http.ServerResponse) => res.writeHead(200).end('ok');
const fail500 = (_req: http.IncomingMessage, res: http.ServerResponse) => res.writeHead(500).end('boom');

const MESSAGE = { messageId: 'm1', conversationId: 'c1', direction: 'inbound', channel: 'whatsapp' };
// Short retry delays. The attempt timeout stays generous except where a test needs it short: PGlite runs in
// this process, so a busy event loop must not turn a slow-to-arrive request into a timeout.
const FAST = { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '30,30,30,30,30,30', WEBHOOK_ATTEMPT_TIMEOUT_MS: '10000' };

/** A subscription to `hook` for message.created, one event emitted, and its delivery id. */
async function setup(app: TestApp, hook: Receiver, scopes = FULL_WEBHOOK_SCOPES) {
  const { tenantId, key, apiKeyId } = await app.tenantWithKey(scopes);
  const subscription = await createSubscription(app, key, { url: hook.url, events: ['message.created'] });
  const emitted = await emitEvent(app, tenantId, 'message.created', MESSAGE);
  assert.equal(emitted.deliveries, 1);
  const delivery = await eventually(() => deliveryOf(app, key, subscription.subscriptionId, emitted.eventId), 10_000, 'the delivery row');
  return { tenantId, key, apiKeyId, subscription, subscriptionId: subscription.subscriptionId, eventId: emitted.eventId, deliveryId: delivery.deliveryId };
}

async function attemptLog(app: TestApp, key: string, subscriptionId: string, deliveryId: string) {
  const response = await app.api(key, 'GET', `/webhooks/${subscriptionId}/deliveries/${deliveryId}/attempts`);
  assert.equal(response.statusCode, 200, response.body);
  return (response.json() as { attempts: Array<{ httpStatus?: number; failureCode?: string; error?: string; attemptedAt: string; durationMs: number }> }).attempts;
}

describe('receiver faults, the retry cycle and cancellation', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp({ startWorkers: true, env: FAST });
  });
  after(() => app.close());

  const failed = (d: DeliveryBody) => d.status === 'failed';

  test('500 always: 7 attempts then failed; retry starts a new cycle with the same eventId; 409 once delivered', async () => {
    const hook = await receiver(fail500);
    const { key, tenantId, subscriptionId, eventId, deliveryId } = await setup(app, hook);

    const delivery = await waitForDelivery(app, key, subscriptionId, deliveryId, failed, 'the first cycle to fail', 30_000);
    assert.equal(delivery.attempts, 7);
    assert.equal(delivery.failureCode, 'http_status');
    assert.equal(delivery.httpStatus, 500);
    assert.equal(delivery.eventId, eventId);
    assert.equal('deliveredAt' in delivery, false);
    assert.equal('nextAttemptAt' in delivery, false);
    assert.equal(requestsFor(hook, eventId).length, 7);
    assert.equal(hook.received.length, 7);
    const log = await attemptLog(app, key, subscriptionId, deliveryId);
    assert.equal(log.length, 7);
    for (const attempt of log) {
      assert.equal(attempt.httpStatus, 500);
      assert.equal(attempt.failureCode, 'http_status');
    }

    // Retry needs webhooks:write.
    const reader = await addKey(app, tenantId, ['webhooks:read'], 'reader');
    expectError(await app.api(reader.key, 'POST', `/webhooks/${subscriptionId}/deliveries/${deliveryId}/retry`), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    expectError(await app.api(key, 'POST', `/webhooks/${subscriptionId}/deliveries/dlv_missing/retry`), 404, 'M2M_NOT_FOUND');

    hook.setBehaviour(ok);
    const retry = await app.api(key, 'POST', `/webhooks/${subscriptionId}/deliveries/${deliveryId}/retry`);
    assert.equal(retry.statusCode, 200, retry.body);
    const body = retry.json() as { delivery: DeliveryBody };
    assert.deepEqual(Object.keys(body), ['delivery']);
    assert.equal(body.delivery.status, 'pending');
    assert.equal(body.delivery.deliveryId, deliveryId);
    assert.equal(body.delivery.eventId, eventId);
    assert.equal(body.delivery.attempts, 7);
    assert.equal(typeof body.delivery.nextAttemptAt, 'string');

    const delivered = await waitForDelivery(app, key, subscriptionId, deliveryId, (d) => d.status === 'delivered', 'the retry to deliver');
    assert.equal(delivered.attempts, 8);
    assert.equal(delivered.httpStatus, 200);
    assert.equal(typeof delivered.deliveredAt, 'string');
    assert.equal('failureCode' in delivered, false);
    const requests = requestsFor(hook, eventId);
    assert.equal(requests.length, 8);
    assert.equal(new Set(requests.map((r) => r.body)).size, 1, 'every attempt carries the same event');
    assert.equal(JSON.parse(requests[7].body).eventId, eventId);
    assert.equal((await attemptLog(app, key, subscriptionId, deliveryId)).length, 8);

    const again = await app.api(key, 'POST', `/webhooks/${subscriptionId}/deliveries/${deliveryId}/retry`);
    const error = expectError(again, 409, 'M2M_CONFLICT');
    assert.equal(error.details.status, 'delivered');
  });

  test('a retry whose receiver keeps failing runs a full new cycle of 7 attempts', async () => {
    const hook = await receiver(fail500);
    const { key, subscriptionId, eventId, deliveryId } = await setup(app, hook);
    await waitForDelivery(app, key, subscriptionId, deliveryId, failed, 'the first cycle', 30_000);
    const retry = await app.api(key, 'POST', `/webhooks/${subscriptionId}/deliveries/${deliveryId}/retry`);
    assert.equal(retry.statusCode, 200, retry.body);
    const second = await waitForDelivery(app, key, subscriptionId, deliveryId, (d) => d.status === 'failed' && d.attempts === 14, 'the second cycle', 30_000);
    assert.equal(second.failureCode, 'http_status');
    assert.equal(requestsFor(hook, eventId).length, 14);
  });

  test('302 to another path on the receiver → failureCode redirect; the Location is never requested', async () => {
    const paths: string[] = [];
    const hook: Receiver = await receiver((req, res) => {
      paths.push(req.url ?? '');
      if (req.url === '/hook') res.writeHead(302, { location: `http://127.0.0.1:${hook.port}/elsewhere` }).end();
      else res.writeHead(200).end('should never be reached');
    });
    const { key, subscriptionId, eventId, deliveryId } = await setup(app, hook);
    const delivery = await waitForDelivery(app, key, subscriptionId, deliveryId, failed, 'the redirect failures', 30_000);
    assert.equal(delivery.failureCode, 'redirect');
    assert.equal(delivery.httpStatus, 302);
    assert.equal(delivery.attempts, 7);
    assert.equal(requestsFor(hook, eventId).length, 7);
    assert.deepEqual([...new Set(paths)], ['/hook']);
  });

  test('connection refused (a closed port) → failureCode connection', async () => {
    const closed = await startReceiver();
    await closed.close();
    const { key, subscriptionId, deliveryId } = await setup(app, closed);
    const delivery = await waitForDelivery(app, key, subscriptionId, deliveryId, failed, 'the refused attempts', 30_000);
    assert.equal(delivery.failureCode, 'connection');
    assert.equal('httpStatus' in delivery, false);
    const log = await attemptLog(app, key, subscriptionId, deliveryId);
    assert.equal(log.length, 7);
    assert.match(log[0].error ?? '', /ECONNREFUSED/);
  });

  test('a connection closed mid-response → failureCode connection', async () => {
    const hook = await receiver((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"partial":');
      setImmediate(() => res.socket?.destroy());
    });
    const { key, subscriptionId, eventId, deliveryId } = await setup(app, hook);
    const delivery = await waitForDelivery(app, key, subscriptionId, deliveryId, failed, 'the broken responses', 30_000);
    assert.equal(delivery.failureCode, 'connection');
    assert.equal(delivery.attempts, 7);
    assert.equal(requestsFor(hook, eventId).length, 7);
  });

  // Cancellation: attempts may be held at the receiver for as long as a test needs (the timeout is generous).

  /**
   * A receiver that fails the first attempt at once and holds every later one until `release` opens
   * (then fails it too): while a test acts, the delivery is pending with an attempt in flight.
   */
  async function holdingReceiver(holdFrom = 2) {
    const release = gate();
    let onHeld: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      onHeld = resolve;
    });
    const hook = await receiver((_req, res) => {
      if (hook.received.length < holdFrom) {
        res.writeHead(500).end('boom');
        return;
      }
      onHeld();
      void release.wait().then(() => res.writeHead(500).end('boom'));
    });
    return { hook, release, held };
  }

  /** Makes `key` the owner again (PATCH), lets the receiver accept, emits a new event and waits for it. */
  async function barrier(tenantId: string, key: string, subscriptionId: string, hook: Receiver) {
    hook.setBehaviour(ok);
    const patched = await app.api(key, 'PATCH', `/webhooks/${subscriptionId}`, { active: true });
    assert.equal(patched.statusCode, 200, patched.body);
    const next = await emitEvent(app, tenantId, 'message.created', { ...MESSAGE, messageId: 'm2' });
    assert.equal(next.deliveries, 1);
    await eventually(async () => {
      const d = await deliveryOf(app, key, subscriptionId, next.eventId);
      return d?.status === 'delivered';
    }, 20_000, 'the barrier event');
    return next.eventId;
  }

  test('owner key revoked mid-retry → canceled; no further attempts', async () => {
    const { hook, release, held } = await holdingReceiver();
    try {
      const { tenantId, apiKeyId, subscriptionId, eventId, deliveryId } = await setup(app, hook, ['webhooks:write', 'conversations:read']);
      const admin = await addKey(app, tenantId, FULL_WEBHOOK_SCOPES, 'admin');
      await held;
      assert.equal((await getDelivery(app, admin.key, subscriptionId, deliveryId)).status, 'pending');

      await app.admin('POST', `/tenants/${tenantId}/api-keys/${apiKeyId}/revoke`);
      const canceled = await getDelivery(app, admin.key, subscriptionId, deliveryId);
      assert.equal(canceled.status, 'canceled');
      assert.equal('nextAttemptAt' in canceled, false);

      release.open(); // the in-flight attempt may finish (and fails)
      await settle();
      assert.equal(requestsFor(hook, eventId).length, 2, 'the in-flight attempt was the last one');
      assert.equal((await getDelivery(app, admin.key, subscriptionId, deliveryId)).status, 'canceled');
      const retry = await app.api(admin.key, 'POST', `/webhooks/${subscriptionId}/deliveries/${deliveryId}/retry`);
      assert.equal(expectError(retry, 409, 'M2M_CONFLICT').details.status, 'canceled');

      await barrier(tenantId, admin.key, subscriptionId, hook);
      assert.equal(requestsFor(hook, eventId).length, 2);
      assert.equal((await getDelivery(app, admin.key, subscriptionId, deliveryId)).status, 'canceled');
    } finally {
      release.open();
    }
  });

  test('owner key downscoped without the event read scope → canceled; an unrelated downscope changes nothing', async () => {
    const { hook, release, held } = await holdingReceiver();
    try {
      const { tenantId, apiKeyId, subscriptionId, eventId, deliveryId } = await setup(app, hook, ['webhooks:write', 'conversations:read', 'messages:read']);
      const admin = await addKey(app, tenantId, FULL_WEBHOOK_SCOPES, 'admin');
      await held;

      await app.admin('PATCH', `/tenants/${tenantId}/api-keys/${apiKeyId}`, { scopes: ['webhooks:write', 'conversations:read'] });
      assert.equal((await getDelivery(app, admin.key, subscriptionId, deliveryId)).status, 'pending', 'messages:read is not needed');

      await app.admin('PATCH', `/tenants/${tenantId}/api-keys/${apiKeyId}`, { scopes: ['webhooks:write'] });
      assert.equal((await getDelivery(app, admin.key, subscriptionId, deliveryId)).status, 'canceled');

      release.open();
      await settle();
      assert.equal(requestsFor(hook, eventId).length, 2);
      assert.equal((await getDelivery(app, admin.key, subscriptionId, deliveryId)).status, 'canceled');

      await barrier(tenantId, admin.key, subscriptionId, hook);
      assert.equal(requestsFor(hook, eventId).length, 2);
      assert.equal((await getDelivery(app, admin.key, subscriptionId, deliveryId)).status, 'canceled');
    } finally {
      release.open();
    }
  });

  test('subscription disabled → canceled; re-enabled → the canceled delivery stays canceled and is not resent', async () => {
    const { hook, release, held } = await holdingReceiver();
    try {
      const { tenantId, key, subscriptionId, eventId, deliveryId } = await setup(app, hook);
      await held;
      const disabled = await app.api(key, 'PATCH', `/webhooks/${subscriptionId}`, { active: false });
      assert.equal(disabled.statusCode, 200, disabled.body);
      assert.equal((await getDelivery(app, key, subscriptionId, deliveryId)).status, 'canceled');

      // While disabled, new events produce no delivery.
      const ignored = await emitEvent(app, tenantId, 'message.created', { ...MESSAGE, messageId: 'while-disabled' });
      assert.equal(ignored.deliveries, 0);

      release.open();
      await settle();
      assert.equal(requestsFor(hook, eventId).length, 2);

      const barrierEvent = await barrier(tenantId, key, subscriptionId, hook); // re-enables
      assert.equal(requestsFor(hook, eventId).length, 2, 'the canceled event is not replayed');
      assert.equal(requestsFor(hook, ignored.eventId).length, 0);
      assert.equal((await getDelivery(app, key, subscriptionId, deliveryId)).status, 'canceled');
      assert.deepEqual(
        (await listDeliveries(app, key, subscriptionId)).map((d) => [d.eventId, d.status]),
        [[barrierEvent, 'delivered'], [eventId, 'canceled']],
      );
    } finally {
      release.open();
    }
  });

  test('subscription deleted while an attempt is in flight → no attempts after the in-flight one', async () => {
    const { hook, release, held } = await holdingReceiver(1);
    try {
      const { key, subscriptionId, eventId, deliveryId } = await setup(app, hook);
      await held;
      const removed = await app.api(key, 'DELETE', `/webhooks/${subscriptionId}`);
      assert.equal(removed.statusCode, 204, removed.body);
      expectError(await app.api(key, 'GET', `/webhooks/${subscriptionId}/deliveries/${deliveryId}`), 404, 'M2M_NOT_FOUND');
      assert.equal((await deliveryRowOf(app, eventId))?.status, 'canceled');

      release.open(); // the in-flight attempt finishes with a 500, which would normally schedule a retry
      await settle();
      assert.equal(requestsFor(hook, eventId).length, 1);
      assert.equal((await deliveryRowOf(app, eventId))?.status, 'canceled');
    } finally {
      release.open();
    }
  });
});

describe('attempt timeout', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp({ startWorkers: true, env: { ...FAST, WEBHOOK_ATTEMPT_TIMEOUT_MS: '400' } });
  });
  after(() => app.close());

  test('a receiver slower than the attempt timeout → failureCode timeout', async () => {
    const timers: NodeJS.Timeout[] = [];
    const hook = await receiver((_req, res) => {
      timers.push(setTimeout(() => res.writeHead(200).end('too late'), 2_000));
    });
    try {
      const { key, subscriptionId, deliveryId } = await setup(app, hook);
      const delivery = await waitForDelivery(app, key, subscriptionId, deliveryId, (d) => d.status === 'failed', 'the timeouts', 60_000);
      assert.equal(delivery.failureCode, 'timeout');
      assert.equal(delivery.attempts, 7);
      assert.equal('httpStatus' in delivery, false);
      const log = await attemptLog(app, key, subscriptionId, deliveryId);
      assert.equal(log.length, 7);
      assert.ok(log.every((a) => a.failureCode === 'timeout'));
    } finally {
      for (const timer of timers) clearTimeout(timer);
    }
  });
});

describe('delivery metadata retention', () => {
  const DAY = 24 * 60 * 60 * 1000;
  const clock = new ManualClock('2026-01-10T08:00:00.000Z');
  let app: TestApp;

  before(async () => {
    app = await startTestApp({ clock, startWorkers: true, env: FAST });
  });
  after(() => app.close());

  /** Waits until the maintenance job has run at the current clock time (it reschedules itself an hour later). */
  async function maintenanceRanNow(): Promise<void> {
    const expected = clock.now().getTime() + 60 * 60 * 1000;
    app.runtime.runner.wake();
    await eventually(async () => {
      const rows = await app.runtime.services.db.query<{ run_at: Date }>(`SELECT run_at FROM jobs WHERE task = 'maintenance' AND state = 'queued'`);
      return rows.length === 1 && rows[0].run_at.getTime() === expected;
    }, 20_000, 'the maintenance job to run');
  }

  async function counts(eventId: string, deliveryId: string) {
    const { db } = app.runtime.services;
    const one = async (sql: string, value: string) => (await db.query<{ n: number }>(sql, [value]))[0].n;
    return {
      events: await one('SELECT count(*)::int AS n FROM webhook_events WHERE id = $1', eventId),
      deliveries: await one('SELECT count(*)::int AS n FROM webhook_deliveries WHERE id = $1', deliveryId),
      attempts: await one('SELECT count(*)::int AS n FROM webhook_attempts WHERE delivery_id = $1', deliveryId),
    };
  }

  test('the maintenance job removes a delivered delivery 30 days after completion, not before', async () => {
    await maintenanceRanNow(); // the run scheduled at start-up
    const hook = await receiver(ok);
    const { key, subscriptionId, eventId, deliveryId } = await setup(app, hook);
    await waitForDelivery(app, key, subscriptionId, deliveryId, (d) => d.status === 'delivered', 'delivery');
    assert.deepEqual(await counts(eventId, deliveryId), { events: 1, deliveries: 1, attempts: 1 });

    clock.advance(29 * DAY);
    await maintenanceRanNow();
    assert.equal((await getDelivery(app, key, subscriptionId, deliveryId)).status, 'delivered', 'kept for 30 days');

    clock.advance(2 * DAY);
    await maintenanceRanNow();
    expectError(await app.api(key, 'GET', `/webhooks/${subscriptionId}/deliveries/${deliveryId}`), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(await listDeliveries(app, key, subscriptionId), []);
    assert.deepEqual(await counts(eventId, deliveryId), { events: 0, deliveries: 0, attempts: 0 });
  });

  test('purgeExpired removes completed deliveries older than 30 days and keeps pending ones', async () => {
    const good = await receiver(ok);
    const bad = await receiver(fail500);
    const done = await setup(app, good);
    const stuck = await setup(app, bad);
    await waitForDelivery(app, done.key, done.subscriptionId, done.deliveryId, (d) => d.status === 'delivered', 'delivery');
    // The manual clock does not move, so the failing delivery waits for its retry: pending.
    await waitForDelivery(app, stuck.key, stuck.subscriptionId, stuck.deliveryId, (d) => d.attempts === 1, 'first failure');

    clock.advance(30 * DAY - 60_000);
    await maintenanceRanNow(); // runs now and not again for an hour of clock time
    assert.equal((await getDelivery(app, done.key, done.subscriptionId, done.deliveryId)).status, 'delivered');

    clock.advance(2 * 60_000);
    assert.equal(await app.runtime.services.webhooks.purgeExpired(), 1, 'deliveries purged');
    assert.equal(await app.runtime.services.events.purgeExpired(), 1, 'events purged: the pending delivery keeps its own');
    expectError(await app.api(done.key, 'GET', `/webhooks/${done.subscriptionId}/deliveries/${done.deliveryId}`), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(await counts(done.eventId, done.deliveryId), { events: 0, deliveries: 0, attempts: 0 });
    assert.equal((await getDelivery(app, stuck.key, stuck.subscriptionId, stuck.deliveryId)).status, 'pending');
    assert.equal((await counts(stuck.eventId, stuck.deliveryId)).events, 1);
  });
});
