import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';

// A database that cannot be reached answers 503 M2M_UNAVAILABLE with Retry-After (not a 500 a client would
// take for a bug, nor a 401 for the key that could not be looked up). On PostgreSQL the server sits behind a
// TCP proxy this test starts on 127.0.0.1 and then closes: the API answers 503 while it is down and recovers
// by itself once it is back. On PGlite the embedded database is closed (it cannot come back in-process).

/** A TCP proxy to the PostgreSQL server that can be stopped (every connection cut) and started again. */
class Proxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    const address = server.address();
    assert.ok(address && typeof address === 'object');
    this.port = address.port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

const apps: TestApp[] = [];
const proxies: Proxy[] = [];
after(async () => {
  for (const proxy of proxies) await proxy.stop();
  for (const app of apps) await app.close().catch(() => undefined);
});

function assertUnavailable(res: { statusCode: number; headers: Record<string, unknown>; json(): { error: { code: string; details: Record<string, unknown> } } }) {
  assert.equal(res.statusCode, 503);
  assert.equal(res.json().error.code, 'M2M_UNAVAILABLE');
  assert.equal(res.headers['retry-after'], '5');
  assert.match(String(res.headers['x-request-id']), /^req_/);
  assert.equal(res.json().error.details.requestId, res.headers['x-request-id']);
}

/** SQL that fails for a reason other than reachability, through the same error handler: still a 500. */
async function assertBugIs500(app: TestApp): Promise<void> {
  const res = await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1-test/bad-sql' });
  assert.equal(res.statusCode, 500);
  assert.equal(res.json().error.code, 'M2M_INTERNAL_ERROR');
}

async function startApp(env: Record<string, string>): Promise<TestApp> {
  const app = await startTestApp({ env });
  apps.push(app);
  app.runtime.app.get('/m2m/v1-test/bad-sql', { schema: { hide: true } }, async () => app.runtime.services.db.query('SELECT * FROM no_such_table'));
  return app;
}

const databaseUrl = process.env.DATABASE_URL;

test('PostgreSQL down: 503 with Retry-After, then recovery without a restart; a bug is still a 500', { skip: !databaseUrl && 'PostgreSQL only' }, async () => {
  const target = new URL(databaseUrl!);
  const proxy = new Proxy({ host: target.hostname, port: Number(target.port || 5432) });
  proxies.push(proxy);
  await proxy.start();
  const viaProxy = new URL(databaseUrl!);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  // No key cache: the key lookup itself meets the outage.
  const app = await startApp({ DATABASE_URL: viaProxy.toString(), API_KEY_CACHE_TTL_MS: '0' });
  const { tenantId, key } = await app.tenantWithKey(['webhooks:write', 'conversations:read']);
  await assertBugIs500(app);
  const subscription = { url: 'https://hooks.example.com/a', events: ['message.created'] };
  assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 200);

  await proxy.stop();
  assertUnavailable(await app.api(key, 'GET', '/webhooks'));
  assertUnavailable(await app.api(key, 'POST', '/webhooks', subscription));
  assertUnavailable(await app.runtime.app.inject({ method: 'GET', url: '/readyz' }));
  assertUnavailable(await app.adminRaw('POST', `/tenants/${tenantId}/api-keys`, { name: 'k', scopes: ['webhooks:read'] }));

  await proxy.start();
  const back = await eventually(async () => {
    const res = await app.api(key, 'GET', '/webhooks');
    return res.statusCode === 200 ? res : undefined;
  }, 15_000, 'the API to answer again');
  assert.deepEqual(back.json(), { subscriptions: [] }, 'the create refused during the outage wrote nothing');
  assert.equal((await app.api(key, 'POST', '/webhooks', subscription)).statusCode, 201);
  assert.equal((await app.runtime.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
});

test('PGlite closed: 503 with Retry-After; a bug is still a 500', { skip: !!databaseUrl && 'PGlite only' }, async () => {
  const app = await startApp({ API_KEY_CACHE_TTL_MS: '0' });
  const { key } = await app.tenantWithKey(['webhooks:write']);
  assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 200);
  await assertBugIs500(app);
  await app.runtime.services.db.close();
  assertUnavailable(await app.api(key, 'GET', '/webhooks'));
  assertUnavailable(await app.runtime.app.inject({ method: 'GET', url: '/readyz' }));
});

