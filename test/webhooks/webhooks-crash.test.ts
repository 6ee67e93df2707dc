import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../helpers/app.js';
import { freePort, inheritedEnv, ServerProcess } from '../helpers/server-process.js';
import { startReceiver } from '../helpers/receiver.js';
import { sharedDatabase } from '../helpers/shared-db.js';
import { FULL_WEBHOOK_SCOPES, gate } from '../fixtures/webhooks.js';

// The real server (`src/main.ts`) in a child process is SIGKILLed in the middle of a burst of deliveries and
// started again on the same database: every emitted event still reaches the receiver (at least once).

const ADMIN_TOKEN = 'crash-test-admin-token';
const EVENTS = 200;

/** A server on `port` of the test's database, delivering to private addresses (the receiver), polling often. */
function serverEnv(database: { env: Record<string, string> }, port: number, more: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...inheritedEnv(),
    ...database.env,
    ADMIN_TOKEN,
    PORT: String(port),
    HOST: '127.0.0.1',
    UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true',
    LOG_LEVEL: 'warn',
    JOB_POLL_INTERVAL_MS: '100',
    ...more,
  };
}

describe('webhook delivery survives a server crash', () => {
  let database: Awaited<ReturnType<typeof sharedDatabase>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const servers: ServerProcess[] = [];
  const emittedAll = gate();
  const timers = new Set<NodeJS.Timeout>();
  let env: NodeJS.ProcessEnv;
  let base: string;

  before(async () => {
    database = await sharedDatabase();
    // Requests wait until the whole burst is emitted, then each is answered after 50 ms.
    receiver = await startReceiver((_req, res) => {
      void emittedAll.wait().then(() => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          res.writeHead(200).end('ok');
        }, 50);
        timers.add(timer);
      });
    });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    env = serverEnv(database, port, {
      WEBHOOK_ATTEMPT_TIMEOUT_MS: '2000',
      WEBHOOK_RETRY_DELAYS_MS: '50,50,50,50,50,50',
      // Two concurrent attempts at the receiver keep the burst in progress long enough to kill the server in it.
      WEBHOOK_MAX_IN_FLIGHT_PER_HOST: '2',
    });
  });

  after(async () => {
    emittedAll.open();
    await Promise.all(servers.map((server) => server.kill('SIGKILL')));
    for (const timer of timers) clearTimeout(timer);
    await receiver?.close();
    await database?.drop();
  });

  function startServer(): ServerProcess {
    const server = new ServerProcess(env, base, ADMIN_TOKEN);
    servers.push(server);
    return server;
  }

  test('SIGKILL mid-burst, restart: every emitted event is delivered at least once', { timeout: 120_000 }, async (t) => {
    const first = startServer();
    await first.ready();

    const tenant = await first.ok<{ tenantId: string }>('POST', '/admin/v1/tenants', { name: 'Crash Hotel' });
    const { key } = await first.ok<{ key: string }>('POST', `/admin/v1/tenants/${tenant.tenantId}/api-keys`, { name: 'crash', scopes: FULL_WEBHOOK_SCOPES });
    const subscription = await first.ok<{ subscriptionId: string }>('POST', '/m2m/v1/webhooks', { url: receiver.url, events: ['message.created'] }, key);

    const eventIds: string[] = [];
    for (let batch = 0; batch < EVENTS; batch += 10) {
      const results = await Promise.all(
        Array.from({ length: Math.min(10, EVENTS - batch) }, (_, i) =>
          first.ok<{ eventId: string; deliveries: number }>('POST', `/admin/v1/tenants/${tenant.tenantId}/webhook-events`, {
            type: 'message.created',
            data: { messageId: `msg_${batch + i}`, conversationId: 'conv_1', direction: 'inbound', channel: 'whatsapp' },
          }),
        ),
      );
      for (const result of results) {
        assert.equal(result.deliveries, 1);
        eventIds.push(result.eventId);
      }
    }
    assert.equal(new Set(eventIds).size, EVENTS);
    emittedAll.open();

    const distinctSeen = () => new Set(receiver.eventIds()).size;
    await eventually(async () => distinctSeen() >= 20, 60_000, 'the receiver to see part of the burst');
    await first.kill('SIGKILL');
    const seenAtKill = distinctSeen();
    assert.ok(seenAtKill < EVENTS, `the burst was already complete (${seenAtKill}) when the server was killed`);

    const second = startServer();
    await second.ready();
    await eventually(async () => distinctSeen() === EVENTS, 100_000, `every event to reach the receiver (seen ${distinctSeen()} of ${EVENTS})`);
    const seen = new Set(receiver.eventIds());
    for (const eventId of eventIds) assert.ok(seen.has(eventId), `${eventId} never arrived`);
    assert.equal(seen.size, EVENTS, 'nothing but the emitted events arrived');

    const deliveries = await eventually(
      async () => {
        const page = await second.ok<{ deliveries: Array<{ eventId: string; status: string }>; hasMore: boolean }>(
          'GET',
          `/m2m/v1/webhooks/${subscription.subscriptionId}/deliveries?limit=200`,
          undefined,
          key,
        );
        assert.equal(page.hasMore, false);
        return page.deliveries.every((d) => d.status === 'delivered') ? page.deliveries : undefined;
      },
      30_000,
      'every delivery to read delivered',
    );
    assert.equal(deliveries.length, EVENTS);
    assert.deepEqual(new Set(deliveries.map((d) => d.eventId)), new Set(eventIds));
    t.diagnostic(`${seenAtKill} of ${EVENTS} events had arrived at the kill; ${receiver.received.length} requests in all`);
  });
});

describe('webhook delivery across a graceful stop', () => {
  let database: Awaited<ReturnType<typeof sharedDatabase>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const servers: ServerProcess[] = [];

  before(async () => {
    database = await sharedDatabase();
    // The first request is never answered; later ones are.
    receiver = await startReceiver((_req, res) => {
      if (receiver.received.length > 1) res.writeHead(200).end('ok');
    });
  });

  after(async () => {
    await Promise.all(servers.map((server) => server.kill('SIGKILL')));
    await receiver?.close();
    await database?.drop();
  });

  test('SIGTERM while an attempt hangs: exit 0 after the grace, the delivery handed back unrecorded, the next node delivers it', { timeout: 120_000 }, async () => {
    const port = await freePort();
    const env = serverEnv(database, port, {
      // The attempt would outlast the grace and the 10 s the stop allows besides: exit 0 means it was ended.
      WEBHOOK_ATTEMPT_TIMEOUT_MS: '60000',
      SHUTDOWN_GRACE_MS: '300',
    });
    const first = new ServerProcess(env, `http://127.0.0.1:${port}`, ADMIN_TOKEN);
    servers.push(first);
    await first.ready();
    const tenant = await first.ok<{ tenantId: string }>('POST', '/admin/v1/tenants', { name: 'Graceful Hotel' });
    const { key } = await first.ok<{ key: string }>('POST', `/admin/v1/tenants/${tenant.tenantId}/api-keys`, { name: 'stop', scopes: FULL_WEBHOOK_SCOPES });
    const subscription = await first.ok<{ subscriptionId: string }>('POST', '/m2m/v1/webhooks', { url: receiver.url, events: ['message.created'] }, key);
    const { eventId } = await first.ok<{ eventId: string }>('POST', `/admin/v1/tenants/${tenant.tenantId}/webhook-events`, {
      type: 'message.created',
      data: { messageId: 'msg_stop', conversationId: 'conv_1', direction: 'inbound', channel: 'whatsapp' },
    });
    await eventually(async () => receiver.received.length === 1, 30_000, 'the attempt to reach the receiver');

    await first.kill('SIGTERM'); // throws unless the exit code is 0

    const second = new ServerProcess(env, `http://127.0.0.1:${port}`, ADMIN_TOKEN);
    servers.push(second);
    await second.ready();
    const delivered = await eventually(
      async () => {
        const page = await second.ok<{ deliveries: Array<{ eventId: string; status: string; attempts: number }> }>(
          'GET',
          `/m2m/v1/webhooks/${subscription.subscriptionId}/deliveries`,
          undefined,
          key,
        );
        return page.deliveries[0]?.status === 'delivered' ? page.deliveries[0] : undefined;
      },
      30_000,
      'the handed-back delivery to be delivered by the next node',
    );
    assert.equal(delivered.eventId, eventId);
    assert.equal(delivered.attempts, 1, 'the ended attempt is not counted');
    assert.deepEqual(receiver.eventIds(), [eventId, eventId]);
  });
});
