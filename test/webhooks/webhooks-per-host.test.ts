import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { FULL_WEBHOOK_SCOPES, createSubscription, emitEvent } from '../fixtures/webhooks.js';

// The per-destination cap with two destinations: a slow host never has more than its cap in flight,
// and its backlog neither blocks another host nor gets claimed only to be handed back.

const CAP = 3;
let app: TestApp;
let slow: Awaited<ReturnType<typeof startReceiver>>;
let fast: Awaited<ReturnType<typeof startReceiver>>;
const held: http.ServerResponse[] = [];
let inFlight = 0;
let maxInFlight = 0;

before(async () => {
  slow = await startReceiver((_req, res) => {
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    held.push(res);
    res.on('close', () => (inFlight -= 1));
  });
  fast = await startReceiver();
  app = await startTestApp({
    env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_MAX_IN_FLIGHT_PER_HOST: String(CAP), WEBHOOK_ATTEMPT_TIMEOUT_MS: '20000' },
    startWorkers: true,
  });
});
after(async () => {
  for (const res of held) res.end();
  await app.close();
  await slow.close();
  await fast.close();
});

test('a held destination gets at most its cap; another destination is served meanwhile; nothing is claimed and handed back', async () => {
  const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
  // Two hosts: the slow receiver as 127.0.0.1, the fast one as localhost.
  await createSubscription(app, key, { url: slow.url, events: ['message.created'] });
  await createSubscription(app, key, { url: fast.url.replace('127.0.0.1', 'localhost'), events: ['message.created'] });
  for (let i = 0; i < 12; i++) await emitEvent(app, tenantId, 'message.created', { messageId: `m${i}` });

  await eventually(async () => fast.received.length >= 12, 20_000, 'every event at the fast host');
  await eventually(async () => held.length >= CAP, 10_000, 'the slow host to hold its cap');
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(held.length, CAP, 'no more than the cap reached the slow host');
  assert.equal(maxInFlight, CAP);

  const db = app.runtime.services.db;
  const locked = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
     WHERE s.host = '127.0.0.1' AND d.locked_by IS NOT NULL`,
  );
  assert.equal(locked[0].n, CAP, 'only the attempts in flight hold a lease');

  // Release the slow host one request at a time: the rest follow, never more than CAP at once.
  await eventually(async () => {
    for (const res of held.splice(0)) res.writeHead(200).end('ok');
    return slow.received.length >= 12 && inFlight === 0;
  }, 20_000, 'the slow host to receive everything');
  assert.ok(maxInFlight <= CAP, `max in flight at the slow host ${maxInFlight}`);
});
