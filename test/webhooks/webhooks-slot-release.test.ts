import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { FULL_WEBHOOK_SCOPES, createSubscription, emitEvent } from '../fixtures/webhooks.js';

// A destination's request slot is given back when its request ends, not when the attempt's outcome commits:
// with every outcome write held back, the worker keeps sending (never more than the cap at once) until its
// in-flight bound is full of attempts waiting for their outcome, and sends nothing more until they commit.
// PostgreSQL only: the outcome writes are held back by a table lock taken on a second connection.

const CAP = 2;
const MAX_IN_FLIGHT = 5;
const EVENTS = 12;
const databaseUrl = process.env.DATABASE_URL;

let app: TestApp | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
let locker: pg.Client | undefined;
const timers = new Set<NodeJS.Timeout>();
let concurrent = 0;
let maxConcurrent = 0;

before(async () => {
  if (!databaseUrl) return;
  // Each request is answered 20 ms after it arrived, so requests to the host overlap.
  receiver = await startReceiver((_req, res) => {
    concurrent += 1;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    const timer = setTimeout(() => {
      timers.delete(timer);
      concurrent -= 1;
      res.writeHead(200).end('ok');
    }, 20);
    timers.add(timer);
  });
  app = await startTestApp({
    env: {
      UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true',
      WEBHOOK_MAX_IN_FLIGHT_PER_HOST: String(CAP),
      WEBHOOK_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
    },
    startWorkers: true,
  });
});

after(async () => {
  await locker?.end().catch(() => undefined);
  for (const timer of timers) clearTimeout(timer);
  await app?.close();
  await receiver?.close();
});

test('request slots are freed before outcomes commit; the in-flight bound holds until they do', { skip: !databaseUrl && 'needs PostgreSQL' }, async () => {
  assert.ok(app && receiver && databaseUrl);
  const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
  const { subscriptionId } = await createSubscription(app, key, { url: receiver.url, events: ['message.created'] });

  // The outcome statement also inserts the attempt log rows: an EXCLUSIVE lock on that table holds it back
  // (reads stay possible).
  locker = new pg.Client({ connectionString: databaseUrl, options: `-c search_path=${app.databaseEnv.DATABASE_SCHEMA},public` });
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE webhook_attempts IN EXCLUSIVE MODE');

  for (let i = 0; i < EVENTS; i++) await emitEvent(app, tenantId, 'message.created', { messageId: `m${i}` });
  await eventually(async () => receiver!.received.length >= MAX_IN_FLIGHT, 20_000, 'the in-flight bound to fill');
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(receiver.received.length, MAX_IN_FLIGHT, 'more than the cap was sent without any outcome committed, but no more than the bound');
  assert.ok(maxConcurrent <= CAP, `at most ${CAP} requests at the destination at once, saw ${maxConcurrent}`);
  const logged = await locker.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_attempts');
  assert.equal(logged.rows[0].n, 0, 'no outcome was committed meanwhile');

  await locker.query('COMMIT');
  const db = app.runtime.services.db;
  await eventually(
    async () => {
      const rows = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = $1 AND status = 'delivered'`, [
        subscriptionId,
      ]);
      return rows[0].n === EVENTS;
    },
    20_000,
    'every delivery to be delivered',
  );
  assert.equal(new Set(receiver.eventIds()).size, EVENTS);
  assert.ok(maxConcurrent <= CAP, `at most ${CAP} requests at the destination at once, saw ${maxConcurrent}`);
});
