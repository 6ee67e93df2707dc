import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb } from '../../src/db/driver.js';
import { eventually } from '../helpers/app.js';
import { isolatedDatabase } from '../helpers/db.js';
import { startReceiver } from '../helpers/receiver.js';
import { ROOT, freePort, inheritedEnv, ServerProcess } from '../helpers/server-process.js';

// `npm start` runs the bundle `npm run build` makes (dist/server, scripts/build/bundle.mjs), not the sources the
// other tests load. This start proves that what the bundle moved still finds its files (migrations, the embedded
// template, swagger-ui's assets), that the inlined libraries (TypeBox, libphonenumber-js) answer as in the sources, and
// that the lazily loaded ones (undici, for every outbound request) load from their chunks.

const ADMIN_TOKEN = 'compiled-start-admin-token';
const BUNDLE = path.join(ROOT, 'dist/server/main.js');

test('the bundled server starts, migrates, validates, delivers a webhook, serves its docs and MCP, and stops cleanly', { timeout: 180_000 }, async () => {
  assert.ok(existsSync(BUNDLE), 'dist/server/main.js is missing: `npm ci` (or `npm run build`) makes it');
  const database = await isolatedDatabase();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'm2m-compiled-'));
  const embedded = !process.env.DATABASE_URL;
  const env = { ...inheritedEnv(), ...database.env, ...(embedded ? { DATA_DIR: dataDir } : {}), ADMIN_TOKEN, HOST: '127.0.0.1', LOG_LEVEL: 'warn', MCP_ENABLED: 'true', UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' };
  const port = await freePort();
  const startedAt = new Date();
  const receiver = await startReceiver();
  const server = new ServerProcess({ ...env, PORT: String(port) }, `http://127.0.0.1:${port}`, ADMIN_TOKEN, ['--role', 'all'], [BUNDLE]);
  try {
    await server.ready();
    const { tenantId } = await server.ok<{ tenantId: string }>('POST', '/admin/v1/tenants', { name: 'Bundle Hotel' });
    const { key } = await server.ok<{ key: string }>('POST', `/admin/v1/tenants/${tenantId}/api-keys`, { name: 'b', scopes: ['webhooks:read', 'webhooks:write', 'conversations:read', 'reservations:write'] });

    const list = await server.call<{ subscriptions: unknown[] }>('GET', '/m2m/v1/webhooks', undefined, key);
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.subscriptions, []);
    const invalid = await server.call<{ error: { code: string; message: string } }>('GET', '/m2m/v1/webhooks?foo=bar', undefined, key);
    assert.equal(invalid.status, 400);
    assert.equal(invalid.body.error.code, 'M2M_INVALID_REQUEST');
    assert.match(invalid.body.error.message, /foo/);

    await server.ok('POST', '/m2m/v1/webhooks', { url: receiver.url, events: ['message.created'] }, key);
    const { eventId } = await server.ok<{ eventId: string }>('POST', `/admin/v1/tenants/${tenantId}/webhook-events`, {
      type: 'message.created',
      data: { messageId: 'msg_bundle', conversationId: 'conv_bundle', direction: 'inbound', channel: 'webchat' },
    });
    await eventually(async () => receiver.eventIds().includes(eventId), 30_000, 'the webhook to be delivered');

    const { integrationId } = await server.ok<{ integrationId: string }>('POST', `/admin/v1/tenants/${tenantId}/integrations`, { provider: 'pms', name: 'PMS' });
    const mirror = await server.ok<{ guestPhoneNormalized?: string }>('PUT', `/admin/v1/tenants/${tenantId}/integrations/${integrationId}/reservations/R-1`, {
      status: 'confirmed', checkInDate: '2031-07-01', checkOutDate: '2031-07-04', bookedAt: '2031-01-01T10:00:00.000Z', guestFullName: 'Ana López', guestPhone: '+34 612 345 678',
    });
    assert.equal(mirror.guestPhoneNormalized, '+34612345678');

    const openapi = await server.call<{ paths: Record<string, unknown> }>('GET', '/m2m/v1/openapi.json');
    assert.equal(openapi.status, 200);
    assert.ok(Object.keys(openapi.body.paths).length > 40);
    const page = await fetch(`${server.base}/m2m/v1/docs`);
    assert.equal(page.status, 200);
    const html = await page.text();
    const asset = /(?:src|href)="([^"]+\.(?:js|css))"/.exec(html)?.[1];
    assert.ok(asset, 'the docs page links its assets');
    assert.equal((await fetch(new URL(asset, `${server.base}/m2m/v1/docs`))).status, 200, `${asset} is served`);

    const mcp = await fetch(`${server.base}/m2m/v1/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    assert.equal(mcp.status, 200);
    assert.match(await mcp.text(), /list_webhooks/);

    await server.kill('SIGTERM');
  } finally {
    await server.kill();
    await receiver.close();
    await database.drop();
  }
  if (embedded) {
    // An empty data directory started from the template the build made: its migrations predate this start.
    const db = await openDb({ dataDir });
    try {
      const [row] = await db.query<{ first: Date }>('SELECT min(applied_at) AS first FROM schema_migrations');
      assert.ok(row.first < startedAt, `migrations applied at ${row.first.toISOString()}, the start was ${startedAt.toISOString()}`);
    } finally {
      await db.close();
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
});
