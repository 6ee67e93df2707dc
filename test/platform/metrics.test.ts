import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { eventually, startTestApp } from '../helpers/app.js';
import { isolatedDatabase } from '../helpers/db.js';
import { startReceiver } from '../helpers/receiver.js';
import { freePort, inheritedEnv, ServerProcess } from '../helpers/server-process.js';
import { FULL_WEBHOOK_SCOPES } from '../fixtures/webhooks.js';
import { enqueue } from '../../src/jobs/queue.js';
import type { Db, PoolUse } from '../../src/db/driver.js';
import { Metrics } from '../../src/metrics/prometheus.js';
import { systemClock } from '../../src/clock.js';

// The real server with METRICS_PORT: API calls and webhook deliveries show up in the Prometheus text served at
// GET /metrics on its own port.

const ADMIN_TOKEN = 'metrics-test-admin-token';

/** Value of the sample `name{labels}` in a Prometheus text body (labels in the order prom-client writes them). */
function sample(body: string, name: string, labels = ''): number | undefined {
  const prefix = labels ? `${name}{${labels}} ` : `${name} `;
  const line = body.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}

describe('Prometheus metrics on METRICS_PORT', () => {
  let database: Awaited<ReturnType<typeof isolatedDatabase>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let server: ServerProcess;
  let metricsUrl: string;

  before(async () => {
    database = await isolatedDatabase();
    receiver = await startReceiver();
    const [port, metricsPort] = [await freePort(), await freePort()];
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    server = new ServerProcess(
      {
        ...inheritedEnv(),
        ...database.env,
        ADMIN_TOKEN,
        HOST: '127.0.0.1',
        PORT: String(port),
        METRICS_PORT: String(metricsPort),
        UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true',
        LOG_LEVEL: 'warn',
        JOB_POLL_INTERVAL_MS: '100',
      },
      `http://127.0.0.1:${port}`,
      ADMIN_TOKEN,
    );
    await server.ready();
  });

  after(async () => {
    await server?.kill('SIGTERM');
    await receiver?.close();
    await database?.drop();
  });

  async function scrape(): Promise<string> {
    const response = await request(metricsUrl, { headersTimeout: 30_000, bodyTimeout: 30_000 });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    return response.body.text();
  }

  test('requests by route template and status, webhook attempts by outcome, queues, lag, pool and Node metrics', async () => {
    const tenant = await server.ok<{ tenantId: string }>('POST', '/admin/v1/tenants', { name: 'Metrics Hotel' });
    const { key } = await server.ok<{ key: string }>('POST', `/admin/v1/tenants/${tenant.tenantId}/api-keys`, { name: 'm', scopes: FULL_WEBHOOK_SCOPES });
    await server.ok('POST', '/m2m/v1/webhooks', { url: receiver.url, events: ['message.created'] }, key);
    for (let i = 0; i < 3; i++) assert.equal((await server.call('GET', '/m2m/v1/webhooks', undefined, key)).status, 200);
    assert.equal((await server.call('GET', '/m2m/v1/webhooks/whsub_doesnotexist', undefined, key)).status, 404);
    assert.equal((await server.call('GET', '/m2m/v1/webhooks', undefined, 'm2m_wrong_key')).status, 401);
    for (let i = 0; i < 2; i++) {
      await server.ok('POST', `/admin/v1/tenants/${tenant.tenantId}/webhook-events`, {
        type: 'message.created',
        data: { messageId: `msg_${i}`, conversationId: 'conv_1', direction: 'inbound', channel: 'whatsapp' },
      });
    }
    await eventually(async () => receiver.received.length >= 2, 30_000, 'both deliveries to arrive');

    const body = await eventually(async () => {
      const text = await scrape();
      return (sample(text, 'm2m_webhook_attempts_total', 'outcome="delivered"') ?? 0) >= 2 ? text : undefined;
    }, 10_000, 'the delivered attempts to be counted');

    const hist = 'm2m_http_request_duration_seconds';
    assert.equal(sample(body, `${hist}_count`, 'method="GET",route="/m2m/v1/webhooks",status="200"'), 3);
    assert.equal(sample(body, `${hist}_count`, 'method="GET",route="/m2m/v1/webhooks/:subscriptionId",status="404"'), 1);
    assert.equal(sample(body, `${hist}_count`, 'method="GET",route="/m2m/v1/webhooks",status="401"'), 1);
    assert.equal(sample(body, `${hist}_bucket`, 'le="+Inf",method="GET",route="/m2m/v1/webhooks",status="200"'), 3);
    assert.ok((sample(body, `${hist}_sum`, 'method="GET",route="/m2m/v1/webhooks",status="200"') ?? -1) > 0);
    // Raw ids never become label values.
    assert.doesNotMatch(body, /whsub_doesnotexist/);

    for (const name of [
      'm2m_job_queue_depth',
      'm2m_job_queue_oldest_age_seconds',
      'm2m_message_sends_total',
      'm2m_crawl_pages_total',
    ]) {
      assert.match(body, new RegExp(`^# TYPE ${name} `, 'm'), `${name} is exported`);
    }
    assert.equal(sample(body, 'm2m_webhook_deliveries_due'), 0);
    assert.equal(sample(body, 'm2m_webhook_delivery_lag_seconds'), 0);
    if (database.env.DATABASE_URL) {
      assert.ok((sample(body, 'm2m_db_pool_connections') ?? 0) >= 1, 'the pool holds a connection');
      assert.equal(sample(body, 'm2m_db_pool_max_connections'), 20);
      assert.equal(sample(body, 'm2m_db_pool_waiting_queries'), 0, "the scrape's own queries are not counted as waiting");
    } else {
      assert.doesNotMatch(body, /^# TYPE m2m_db_pool_/m, 'the embedded database has no pool: no pool gauges');
    }
    assert.ok((sample(body, 'process_resident_memory_bytes') ?? 0) > 10_000_000, 'Node default metrics are served');
    assert.match(body, /^nodejs_eventloop_lag_seconds /m);
  });

  test('only GET /metrics is served on the metrics port', async () => {
    const response = await request(metricsUrl.replace('/metrics', '/other'));
    assert.equal(response.statusCode, 404);
    await response.body.dump();
  });
});

test('jobs due and not run show in the queue depth and oldest age of their task', async () => {
  // No workers: the jobs stay queued. The clock of the app is the real one, so the ages are real seconds.
  const app = await startTestApp({ env: { METRICS_PORT: '0', HOST: '127.0.0.1' } });
  try {
    const now = Date.now();
    await app.runtime.services.db.transaction(async (tx) => {
      await enqueue(tx, new Date(now), { task: 'test.metrics.a', runAt: new Date(now - 120_000) });
      await enqueue(tx, new Date(now), { task: 'test.metrics.a', runAt: new Date(now - 5_000) });
      await enqueue(tx, new Date(now), { task: 'test.metrics.b', runAt: new Date(now - 1_000) });
      // Not due yet: not waiting, so not counted.
      await enqueue(tx, new Date(now), { task: 'test.metrics.b', runAt: new Date(now + 3_600_000) });
    });
    const response = await request(`http://127.0.0.1:${app.runtime.metricsPort}/metrics`);
    const body = await response.body.text();
    assert.equal(sample(body, 'm2m_job_queue_depth', 'task="test.metrics.a"'), 2);
    assert.equal(sample(body, 'm2m_job_queue_depth', 'task="test.metrics.b"'), 1);
    const ageA = sample(body, 'm2m_job_queue_oldest_age_seconds', 'task="test.metrics.a"') ?? 0;
    assert.ok(ageA >= 120 && ageA < 180, `oldest age of a: ${ageA}`);
    const ageB = sample(body, 'm2m_job_queue_oldest_age_seconds', 'task="test.metrics.b"') ?? 0;
    assert.ok(ageB >= 1 && ageB < 60, `oldest age of b: ${ageB}`);
  } finally {
    await app.close();
  }
});

test('without METRICS_PORT no metrics server is started', async () => {
  const app = await startTestApp();
  try {
    assert.equal(app.runtime.metricsPort, undefined);
  } finally {
    await app.close();
  }
});

test("the pool gauges read the pool as the scrape found it, not the scrape's own queries waiting", async () => {
  // A pool with no open connection (an idle node: they timed out): every query waits until it gets one.
  const use: PoolUse = { total: 0, idle: 0, waiting: 0, max: 20 };
  const db = {
    kind: 'postgres',
    poolUse: () => ({ ...use }),
    async query() {
      use.waiting++;
      await new Promise((resolve) => setImmediate(resolve));
      use.waiting--;
      return [];
    },
  };
  // Only the members the metrics use are given.
  const metrics = new Metrics(db as unknown as Db, systemClock);
  for (let i = 0; i < 3; i++) {
    const body = await metrics.scrape();
    assert.equal(sample(body, 'm2m_db_pool_waiting_queries'), 0);
    assert.equal(sample(body, 'm2m_db_pool_connections'), 0);
    assert.equal(sample(body, 'm2m_db_pool_max_connections'), 20);
  }
});
