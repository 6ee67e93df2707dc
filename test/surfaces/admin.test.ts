import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.js';

describe('admin API', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  test('needs the admin token', async () => {
    const none = await app.runtime.app.inject({ method: 'POST', url: '/admin/v1/tenants', payload: { name: 'x' } });
    assert.equal(none.statusCode, 401);
    const wrong = await app.runtime.app.inject({ method: 'POST', url: '/admin/v1/tenants', headers: { authorization: 'Bearer nope' }, payload: { name: 'x' } });
    assert.equal(wrong.statusCode, 401);
    assert.equal(wrong.json().error.code, 'M2M_AUTH_INVALID_CREDENTIALS');
  });

  test('tenants: 201 with tenantId, name, timezone (default UTC); bad zone is 400', async () => {
    const res = await app.adminRaw('POST', '/tenants', { name: 'Casa Azul', timezone: 'America/Mexico_City' });
    assert.equal(res.statusCode, 201);
    assert.deepEqual(Object.keys(res.json()).sort(), ['name', 'tenantId', 'timezone']);
    assert.equal(res.json().timezone, 'America/Mexico_City');
    assert.equal((await app.admin('POST', '/tenants', { name: 'Plain' })).timezone, 'UTC');
    const bad = await app.adminRaw('POST', '/tenants', { name: 'Bad', timezone: 'Mars/Olympus' });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error.code, 'M2M_INVALID_REQUEST');
    assert.equal((await app.adminRaw('POST', '/tenants', {})).statusCode, 400);
  });

  test('api keys: shown once with a recognisable prefix, stored hashed; unknown scopes rejected; scopes change; revoke', async () => {
    const { tenantId } = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'Keys' });
    const res = await app.adminRaw('POST', `/tenants/${tenantId}/api-keys`, { name: 'pms sync', scopes: ['webhooks:read', 'messages:read'] });
    assert.equal(res.statusCode, 201);
    const key = res.json();
    assert.match(key.key, /^m2m_live_[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(key.scopes, ['messages:read', 'webhooks:read']);
    assert.equal(key.expiresAt, null);
    const stored = await app.runtime.services.db.query<Record<string, unknown>>('SELECT * FROM api_keys WHERE id = $1', [key.apiKeyId]);
    assert.ok(!JSON.stringify(stored).includes(key.key), 'the key itself is not stored');

    const unknown = await app.adminRaw('POST', `/tenants/${tenantId}/api-keys`, { name: 'x', scopes: ['everything:write'] });
    assert.equal(unknown.statusCode, 400);
    const past = await app.adminRaw('POST', `/tenants/${tenantId}/api-keys`, { name: 'x', scopes: [], expiresAt: '2001-01-01T00:00:00Z' });
    assert.equal(past.statusCode, 400);

    const patched = await app.admin('PATCH', `/tenants/${tenantId}/api-keys/${key.apiKeyId}`, { scopes: ['knowledge:read'] });
    assert.deepEqual(patched.scopes, ['knowledge:read']);
    assert.equal(patched.key, undefined, 'the secret is never shown again');
    const revoked = await app.admin('POST', `/tenants/${tenantId}/api-keys/${key.apiKeyId}/revoke`);
    assert.ok(revoked.revokedAt);

    const other = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'Other' });
    const cross = await app.adminRaw('PATCH', `/tenants/${other.tenantId}/api-keys/${key.apiKeyId}`, { scopes: [] });
    assert.equal(cross.statusCode, 404);
    assert.equal((await app.adminRaw('POST', `/tenants/ten_missing/api-keys`, { name: 'x', scopes: [] })).statusCode, 404);
  });

  test('operators: 24-character ids, deactivation, tenant-scoped', async () => {
    const { tenantId } = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'Ops' });
    const res = await app.adminRaw('POST', `/tenants/${tenantId}/operators`, { displayName: 'Ana', email: 'ana@example.com' });
    assert.equal(res.statusCode, 201);
    const op = res.json();
    assert.match(op.operatorId, /^[0-9a-f]{24}$/);
    assert.deepEqual(op, { operatorId: op.operatorId, displayName: 'Ana', email: 'ana@example.com', active: true });
    const off = await app.admin('PATCH', `/tenants/${tenantId}/operators/${op.operatorId}`, { active: false });
    assert.equal(off.active, false);
    const other = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'Other' });
    assert.equal((await app.adminRaw('PATCH', `/tenants/${other.tenantId}/operators/${op.operatorId}`, { active: true })).statusCode, 404);
    assert.equal((await app.adminRaw('POST', `/tenants/${tenantId}/operators`, { displayName: 'X', email: 'not-an-email' })).statusCode, 400);
  });

  test('properties, channels, templates and settings', async () => {
    const { tenantId } = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'World' });
    const property = await app.adminRaw('POST', `/tenants/${tenantId}/properties`, { name: 'Beach House' });
    assert.equal(property.statusCode, 201);
    assert.equal(property.json().name, 'Beach House');
    assert.ok(property.json().propertyId);

    const channel = await app.adminRaw('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'Front desk', phoneNumber: '+5215512345678' });
    assert.equal(channel.statusCode, 201);
    const { channelId, kind, name } = channel.json();
    assert.equal(kind, 'whatsapp');
    assert.equal(name, 'Front desk');
    assert.equal((await app.adminRaw('POST', `/tenants/${tenantId}/channels`, { kind: 'telegram', name: 'x' })).statusCode, 400);

    const readiness = await app.admin('PUT', `/tenants/${tenantId}/channels/${channelId}/templates/guest_welcome`, {
      category: 'UTILITY',
      locales: [
        { locale: 'en_US', status: 'approved', ready: true },
        { locale: 'es_MX', status: 'not_prepared', ready: false },
      ],
    });
    assert.equal(readiness.channelId, channelId);
    assert.equal(readiness.templateName, 'guest_welcome');
    assert.equal(readiness.category, 'UTILITY');
    const locales = readiness.locales as Array<{ locale: string; status: string; ready: boolean; lastFetchedAt: string }>;
    assert.deepEqual(locales.map((l) => [l.locale, l.status, l.ready]), [['en_US', 'approved', true], ['es_MX', 'not_prepared', false]]);
    assert.ok(!Number.isNaN(Date.parse(locales[0].lastFetchedAt)));
    const badLocale = await app.adminRaw('PUT', `/tenants/${tenantId}/channels/${channelId}/templates/guest_welcome`, {
      category: 'UTILITY',
      locales: [{ locale: 'fr_FR', status: 'approved', ready: true }],
    });
    assert.equal(badLocale.statusCode, 400);

    const settings = await app.admin('PATCH', `/tenants/${tenantId}/settings`, { timezone: 'Europe/Madrid', salesAvailable: true });
    assert.deepEqual(settings, { timezone: 'Europe/Madrid', salesAvailable: true, salesPublished: false });
    assert.equal((await app.adminRaw('PATCH', `/tenants/${tenantId}/settings`, {})).statusCode, 400);
    assert.equal((await app.adminRaw('PATCH', `/tenants/${tenantId}/settings`, { timezone: 'Nowhere/Land' })).statusCode, 400);
  });
});

describe('admin API without ADMIN_TOKEN', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ env: { ADMIN_TOKEN: '' } });
  });
  after(() => app.close());

  test('answers 404', async () => {
    const res = await app.runtime.app.inject({ method: 'POST', url: '/admin/v1/tenants', headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { name: 'x' } });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error.code, 'M2M_NOT_FOUND');
  });
});
