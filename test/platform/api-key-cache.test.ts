import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';

const onPostgres = Boolean(process.env.DATABASE_URL);
// A TTL far longer than any test: whatever clears a cached key here is the change notification, not expiry.
const LONG_TTL = { API_KEY_CACHE_TTL_MS: '300000' };

describe('API key cache', () => {
  const apps: TestApp[] = [];
  after(async () => {
    for (const app of apps.reverse()) await app.close();
  });

  test('a revocation or scope change on the same node takes effect on the next request, even for a cached key', async () => {
    const app = await startTestApp({ env: LONG_TTL });
    apps.push(app);
    const { tenantId, key, apiKeyId } = await app.tenantWithKey(['webhooks:read', 'webhooks:write']);
    assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 200);
    assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 200);

    await app.admin('PATCH', `/tenants/${tenantId}/api-keys/${apiKeyId}`, { scopes: ['conversations:read'] });
    const downscoped = await app.api(key, 'GET', '/webhooks');
    assert.equal(downscoped.statusCode, 403);
    assert.deepEqual(downscoped.json().error.details.missingScopes, ['webhooks:read']);
    assert.equal((await app.api(key, 'GET', '/conversations')).statusCode, 200);

    await app.admin('POST', `/tenants/${tenantId}/api-keys/${apiKeyId}/revoke`);
    const revoked = await app.api(key, 'GET', '/webhooks');
    assert.equal(revoked.statusCode, 401);
    assert.equal(revoked.json().error.code, 'M2M_AUTH_INVALID_CREDENTIALS');
  });

  test('a key changed on another node stops working here without waiting for the cache to expire', { skip: !onPostgres && 'needs two nodes on one PostgreSQL database' }, async () => {
    const nodeA = await startTestApp({ env: LONG_TTL });
    apps.push(nodeA);
    const nodeB = await startTestApp({ env: LONG_TTL, sameDatabaseAs: nodeA });
    apps.push(nodeB);
    const { tenantId, key, apiKeyId } = await nodeA.tenantWithKey(['webhooks:read']);
    assert.equal((await nodeA.api(key, 'GET', '/webhooks')).statusCode, 200);

    await nodeB.admin('PATCH', `/tenants/${tenantId}/api-keys/${apiKeyId}`, { scopes: ['conversations:read'] });
    await eventually(async () => (await nodeA.api(key, 'GET', '/webhooks')).statusCode === 403, 5_000, 'node A to see the scope change');

    // The LISTEN connection dies (say PostgreSQL restarted it): node A reconnects and still hears changes.
    const db = nodeA.runtime.services.db;
    const schema = nodeA.databaseEnv.DATABASE_SCHEMA;
    const listeners = async () =>
      db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()`, [`LISTEN "${schema}.%`]);
    const before = await listeners();
    assert.equal(before.length, 2, 'one listener per node');
    const nodeAListener = (await db.query<{ pid: number }>(
      `SELECT a.pid FROM pg_stat_activity a WHERE a.pid = ANY ($1::int[]) ORDER BY a.backend_start LIMIT 1`,
      [before.map((row) => row.pid)],
    ))[0].pid;
    await db.query('SELECT pg_terminate_backend($1)', [nodeAListener]);
    await eventually(async () => {
      const now = await listeners();
      return now.length === 2 && !now.some((row) => row.pid === nodeAListener);
    }, 10_000, 'node A to listen again');

    await nodeB.admin('POST', `/tenants/${tenantId}/api-keys/${apiKeyId}/revoke`);
    await eventually(async () => (await nodeA.api(key, 'GET', '/webhooks')).statusCode === 401, 5_000, 'node A to see the revocation');
  });

  test('API_KEY_CACHE_TTL_MS=0 turns the cache off', async () => {
    const app = await startTestApp({ env: { API_KEY_CACHE_TTL_MS: '0' } });
    apps.push(app);
    const { tenantId, key, apiKeyId } = await app.tenantWithKey(['webhooks:read']);
    assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 200);
    // Changed behind the service's back: only an uncached lookup can notice.
    await app.runtime.services.db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND tenant_id = $2', [apiKeyId, tenantId]);
    assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 401);
  });
});
