import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { RateLimiter } from '../../src/http/rate-limit.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

let app: TestApp;
before(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_RPS: '1', RATE_LIMIT_BURST: '3' } });
});
after(() => app.close());

test('per-key token bucket: burst then 429 M2M_RATE_LIMITED with Retry-After and RateLimit headers', async () => {
  const a = await app.tenantWithKey(['webhooks:read']);
  const b = await app.tenantWithKey(['webhooks:read']);
  const statuses: number[] = [];
  let last;
  for (let i = 0; i < 4; i++) {
    last = await app.api(a.key, 'GET', '/webhooks');
    statuses.push(last.statusCode);
  }
  assert.deepEqual(statuses.slice(0, 3), [200, 200, 200]);
  assert.equal(statuses[3], 429);
  assert.equal(last!.json().error.code, 'M2M_RATE_LIMITED');
  assert.ok(Number(last!.headers['retry-after']) >= 1);
  assert.equal(last!.headers['ratelimit-limit'], '3');
  assert.equal(last!.headers['ratelimit-remaining'], '0');
  // Another key has its own bucket.
  const other = await app.api(b.key, 'GET', '/webhooks');
  assert.equal(other.statusCode, 200);
  assert.equal(other.headers['ratelimit-remaining'], '2');
});

test('token bucket refills at the configured rate', () => {
  let now = 0;
  const limiter = new RateLimiter(2, 2, () => now);
  assert.equal(limiter.take('k').allowed, true);
  assert.equal(limiter.take('k').allowed, true);
  const refused = limiter.take('k');
  assert.equal(refused.allowed, false);
  assert.equal(refused.retryAfterSeconds, 1);
  now += 500; // 2 tokens/s → one token back
  assert.equal(limiter.take('k').allowed, true);
  assert.equal(limiter.take('k').allowed, false);
});
