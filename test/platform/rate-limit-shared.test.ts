import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { Redis } from 'ioredis';
import { SharedRateLimit } from '../../src/http/shared-rate-limit.js';
import { eventually, startTestApp } from '../helpers/app.js';
import { isolatedDatabase } from '../helpers/db.js';
import { freePort, inheritedEnv, ServerProcess } from '../helpers/server-process.js';

// The per-key limit shared through the real Redis of this machine (each run under its own key prefix).

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ADMIN_TOKEN = 'shared-limit-admin-token';

function prefix(): string {
  return `m2m-test-${randomBytes(6).toString('hex')}:`;
}

/** A logger whose lines the test reads. */
function capturingLogger() {
  const lines: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as { level: number; msg: string }) });
  return { log, lines };
}

/** A TCP proxy to Redis that the test can stop (Redis "goes away") and start again on the same port. */
async function redisProxy(port: number) {
  const target = new URL(REDIS_URL);
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  const start = async () => {
    server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 6379), target.hostname);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
  };
  const stop = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, start, stop };
}

test('two limiters (two nodes) on one Redis share each key\'s bucket', async () => {
  const keyPrefix = prefix();
  const options = { url: REDIS_URL, keyPrefix, ratePerSecond: 1, burst: 5, log: pino({ level: 'silent' }) };
  const a = new SharedRateLimit(options);
  const b = new SharedRateLimit(options);
  try {
    assert.equal(await a.connected(), true);
    assert.equal(await b.connected(), true);
    const started = Date.now();
    const decisions = [];
    for (let i = 0; i < 10; i++) decisions.push(await (i % 2 === 0 ? a : b).take('key_1'));
    const elapsedSeconds = (Date.now() - started) / 1000;
    const allowed = decisions.filter((d) => d.allowed).length;
    // One bucket of 5 (plus what refilled at 1/s meanwhile), not 5 per node.
    assert.ok(allowed >= 5 && allowed <= 5 + Math.floor(elapsedSeconds), `allowed ${allowed} of 10 in ${elapsedSeconds}s`);
    assert.equal(decisions[0].remaining, 4);
    assert.equal(decisions[1].remaining, 3, 'the second node sees the first node\'s spend');
    const refused = decisions.find((d) => !d.allowed)!;
    assert.equal(refused.limit, 5);
    assert.ok(refused.retryAfterSeconds >= 1);
    // Another key has its own bucket.
    assert.equal((await b.take('key_2')).remaining, 4);
    const redis = new Redis(REDIS_URL);
    try {
      const ttl = await redis.pttl(`${keyPrefix}ratelimit:key_1`);
      assert.ok(ttl > 0 && ttl <= 6_000, `the bucket expires once it would be full again (pttl ${ttl})`);
    } finally {
      redis.disconnect();
    }
  } finally {
    await a.close();
    await b.close();
  }
});

test('Redis going away: requests are decided by the local bucket, logged once; Redis coming back is picked up', async () => {
  const proxy = await redisProxy(await freePort());
  const { log, lines } = capturingLogger();
  const keyPrefix = prefix();
  const limiter = new SharedRateLimit({ url: proxy.url, keyPrefix, ratePerSecond: 1, burst: 100, log });
  const redis = new Redis(REDIS_URL);
  try {
    assert.equal(await limiter.connected(), true);
    await eventually(async () => (await limiter.take('k')).remaining === 99 && (await redis.exists(`${keyPrefix}ratelimit:k`)) === 1, 5_000, 'the shared bucket');
    await proxy.stop();
    for (let i = 0; i < 5; i++) assert.equal((await limiter.take('k')).allowed, true, 'served while Redis is away');
    const warnings = lines.filter((l) => l.level === 40);
    assert.equal(warnings.length, 1, JSON.stringify(lines));
    assert.match(warnings[0].msg, /Redis is unreachable/);

    await proxy.start();
    await eventually(async () => lines.some((l) => /reachable again/.test(l.msg)), 15_000, 'the client to reconnect');
    await redis.del(`${keyPrefix}ratelimit:k`);
    assert.equal((await limiter.take('k')).remaining, 99, 'the shared bucket is used again');
    assert.equal(await redis.exists(`${keyPrefix}ratelimit:k`), 1);
  } finally {
    await limiter.close();
    await proxy.stop();
    redis.disconnect();
  }
});

test('a server whose Redis is unreachable keeps serving, with the per-process limit', async () => {
  const app = await startTestApp({ env: { REDIS_URL: `redis://127.0.0.1:${await freePort()}`, RATE_LIMIT_RPS: '1', RATE_LIMIT_BURST: '3' } });
  try {
    const { key } = await app.tenantWithKey(['webhooks:read']);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await app.api(key, 'GET', '/webhooks')).statusCode);
    assert.deepEqual(statuses, [200, 200, 200, 429]);
  } finally {
    await app.close();
  }
});

describe('two API server processes on one database share one limit per key', { skip: process.env.DATABASE_URL ? false : 'two processes need one database: PostgreSQL only' }, () => {
  let database: Awaited<ReturnType<typeof isolatedDatabase>>;
  const servers: ServerProcess[] = [];

  before(async () => {
    database = await isolatedDatabase();
    const env = { ...inheritedEnv(), ...database.env, ADMIN_TOKEN, HOST: '127.0.0.1', LOG_LEVEL: 'warn', REDIS_URL, REDIS_KEY_PREFIX: prefix(), RATE_LIMIT_RPS: '1', RATE_LIMIT_BURST: '6' };
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      servers.push(new ServerProcess({ ...env, PORT: String(port) }, `http://127.0.0.1:${port}`, ADMIN_TOKEN, ['--role', 'api']));
      // One at a time: the first applies the migrations.
      await servers[i].ready();
    }
  });

  after(async () => {
    await Promise.all(servers.map((server) => server.kill('SIGTERM')));
    await database?.drop();
  });

  test('a key gets its limit once across both nodes, not once per node', async () => {
    const [a, b] = servers;
    const tenant = await a.ok<{ tenantId: string }>('POST', '/admin/v1/tenants', { name: 'Two Nodes Hotel' });
    const { key } = await a.ok<{ key: string }>('POST', `/admin/v1/tenants/${tenant.tenantId}/api-keys`, { name: 'k', scopes: ['webhooks:read'] });
    const started = Date.now();
    const results = [];
    for (let i = 0; i < 12; i++) results.push(await (i % 2 === 0 ? a : b).call('GET', '/m2m/v1/webhooks', undefined, key));
    const elapsedSeconds = (Date.now() - started) / 1000;
    const allowed = results.filter((r) => r.status === 200).length;
    assert.ok(allowed >= 6 && allowed <= 6 + Math.floor(elapsedSeconds), `allowed ${allowed} of 12 in ${elapsedSeconds}s (per-process limits would allow 12)`);
    assert.equal(results[1].headers['ratelimit-remaining'], '4', 'node b sees node a\'s spend');
    const refused = results.find((r) => r.status === 429)!;
    assert.equal((refused.body as { error: { code: string } }).error.code, 'M2M_RATE_LIMITED');
    assert.ok(Number(refused.headers['retry-after']) >= 1);
  });
});
