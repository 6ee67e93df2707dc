import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { startTestApp, type TestApp } from '../helpers/app.js';

// What an integrator finds with a key alone (decisions 7.4, 7.1 "Public reads"): channels and their templates,
// properties, and contacts whose consent makes a conversation start possible.

let app: TestApp;
before(async () => {
  app = await startTestApp();
});
after(() => app.close());

let phoneSeq = 0;
const nextPhone = (): string => `+5255${40_000_000 + ++phoneSeq}`;

function expectError(res: LightMyRequestResponse, status: number, code: string) {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as { error: { code: string; message: string; details: { issues?: Array<{ path: string }>; reason?: string } } };
  assert.equal(body.error.code, code, res.body);
  return body.error;
}

const paths = (res: LightMyRequestResponse) => (expectError(res, 400, 'M2M_INVALID_REQUEST').details.issues ?? []).map((issue) => issue.path);

describe('channels', () => {
  test('lists and reads channels with provider and connection; templates as stored; foreign ids 404', async () => {
    const { tenantId, key } = await app.tenantWithKey(['channels:read']);
    const other = await app.tenantWithKey(['channels:read']);
    const wa = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, {
      kind: 'whatsapp',
      name: 'Front desk',
      phoneNumber: '+525512345678',
      provider: 'whatsapp_cloud',
      connection: { phoneNumberId: '100200300400', wabaId: '200300400500', accessToken: 'EAAG-test-token' },
    });
    const off = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'Old number', available: false });
    await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'webchat', name: 'Site chat' });

    const list = await app.api(key, 'GET', '/channels');
    assert.equal(list.statusCode, 200, list.body);
    const channels = list.json().channels as Array<Record<string, unknown>>;
    assert.deepEqual(channels.map((c) => [c.name, c.kind, c.provider, (c.connection as { status: string }).status]), [
      ['Front desk', 'whatsapp', 'whatsapp_cloud', 'connected'],
      ['Old number', 'whatsapp', 'sandbox', 'connected'],
      ['Site chat', 'webchat', 'sandbox', 'connected'],
    ]);
    assert.deepEqual(Object.keys(channels[0]).sort(), ['available', 'channelId', 'connection', 'createdAt', 'kind', 'name', 'phoneNumber', 'provider', 'updatedAt']);
    assert.deepEqual((await app.api(other.key, 'GET', '/channels')).json(), { channels: [] });

    const one = await app.api(key, 'GET', `/channels/${off.channelId}`);
    assert.equal(one.statusCode, 200, one.body);
    assert.equal(one.json().channel.available, false);
    expectError(await app.api(other.key, 'GET', `/channels/${wa.channelId}`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'GET', '/channels/ch_missing'), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'GET', `/channels/${'x'.repeat(121)}`), 400, 'M2M_INVALID_REQUEST');
    assert.deepEqual(paths(await app.api(key, 'GET', '/channels?kind=whatsapp')), ['query.kind']);

    assert.deepEqual((await app.api(key, 'GET', `/channels/${wa.channelId}/templates`)).json(), { templates: [] });
    await app.admin('PUT', `/tenants/${tenantId}/channels/${wa.channelId}/templates/guest_welcome`, { category: 'UTILITY', locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
    await app.admin('PUT', `/tenants/${tenantId}/channels/${wa.channelId}/templates/booking_reminder`, { category: 'MARKETING', locales: [{ locale: 'es_MX', status: 'pending', ready: false }] });
    const templates = (await app.api(key, 'GET', `/channels/${wa.channelId}/templates`)).json().templates as Array<{ templateName: string; category: string; locales: Array<Record<string, unknown>> }>;
    assert.deepEqual(templates.map((t) => [t.templateName, t.category, t.locales.map((l) => [l.locale, l.status, l.ready])]), [
      ['booking_reminder', 'MARKETING', [['es_MX', 'pending', false]]],
      ['guest_welcome', 'UTILITY', [['en_US', 'approved', true]]],
    ]);
    assert.ok(templates.every((t) => t.locales.every((l) => typeof l.lastFetchedAt === 'string')));
    expectError(await app.api(other.key, 'GET', `/channels/${wa.channelId}/templates`), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(paths(await app.api(key, 'GET', `/channels/${wa.channelId}/templates?locale=en_US`)), ['query.locale']);
  });

  test('channels:read is a new scope: a key with every other read scope is refused', async () => {
    const { key } = await app.tenantWithKey(['conversations:read', 'messages:read']);
    const error = expectError(await app.api(key, 'GET', '/channels'), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.deepEqual(error.details, { requiredScopes: ['channels:read'], missingScopes: ['channels:read'] });
  });
});

describe('properties', () => {
  test("lists the tenant's properties only; unknown query 400; needs properties:read", async () => {
    const { tenantId, key } = await app.tenantWithKey(['properties:read']);
    const other = await app.tenantWithKey(['properties:read']);
    const a = await app.admin<{ propertyId: string }>('POST', `/tenants/${tenantId}/properties`, { name: 'Hotel Sol Cancún' });
    const b = await app.admin<{ propertyId: string }>('POST', `/tenants/${tenantId}/properties`, { name: 'Hotel Sol Tulum' });
    const res = await app.api(key, 'GET', '/properties');
    assert.equal(res.statusCode, 200, res.body);
    const properties = res.json().properties as Array<{ propertyId: string; name: string; createdAt: string }>;
    assert.deepEqual(properties.map((p) => [p.propertyId, p.name]), [[a.propertyId, 'Hotel Sol Cancún'], [b.propertyId, 'Hotel Sol Tulum']]);
    assert.ok(properties.every((p) => !Number.isNaN(Date.parse(p.createdAt))));
    assert.deepEqual((await app.api(other.key, 'GET', '/properties')).json(), { properties: [] });
    assert.deepEqual(paths(await app.api(key, 'GET', '/properties?limit=5')), ['query.limit']);
    const { key: noScope } = await app.tenantWithKey(['knowledge:read']);
    expectError(await app.api(noScope, 'GET', '/properties'), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
  });
});

describe('contacts', () => {
  test('upsert by E.164 phone: 201 created, 200 existed; consent with its source and time; opt-out', async () => {
    const { key } = await app.tenantWithKey(['contacts:write']);
    const other = await app.tenantWithKey(['contacts:write']);
    const created = await app.api(key, 'POST', '/contacts', { phone: '+52 55 4100 0001', name: 'Ana Martínez', consent: { granted: true, source: 'booking form' } });
    assert.equal(created.statusCode, 201, created.body);
    const contact = created.json().contact;
    assert.equal(contact.phone, '+525541000001');
    assert.equal(contact.name, 'Ana Martínez');
    assert.deepEqual({ ...contact.consent, grantedAt: typeof contact.consent.grantedAt }, { granted: true, source: 'booking form', grantedAt: 'string' });
    assert.equal(contact.optedOut, false);
    assert.equal(contact.optedOutAt, undefined);

    const again = await app.api(key, 'POST', '/contacts', { phone: '+525541000001', consent: { granted: true, source: 'front desk' } });
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(again.json().contact.contactId, contact.contactId);
    assert.equal(again.json().contact.name, 'Ana Martínez', 'a name left out stays');
    assert.equal(again.json().contact.consent.source, 'front desk');
    assert.equal(again.json().contact.consent.grantedAt, contact.consent.grantedAt, 'consent already granted keeps its time');

    // contacts:write implies contacts:read.
    const read = await app.api(key, 'GET', `/contacts/${contact.contactId}`);
    assert.equal(read.statusCode, 200, read.body);
    assert.equal(read.json().contact.contactId, contact.contactId);

    const out = await app.api(key, 'PATCH', `/contacts/${contact.contactId}`, { optedOut: true, name: 'Ana M.' });
    assert.equal(out.statusCode, 200, out.body);
    assert.equal(out.json().contact.optedOut, true);
    assert.equal(typeof out.json().contact.optedOutAt, 'string');
    assert.equal(out.json().contact.name, 'Ana M.');
    const withdrawn = (await app.api(key, 'PATCH', `/contacts/${contact.contactId}`, { consent: { granted: false, source: 'guest asked by email' }, optedOut: false })).json().contact;
    assert.deepEqual(withdrawn.consent, { granted: false, source: 'guest asked by email' });
    assert.equal(withdrawn.optedOutAt, undefined);

    // The same phone in another tenant is another contact; ids of one tenant are 404 for another.
    const theirs = await app.api(other.key, 'POST', '/contacts', { phone: '+525541000001' });
    assert.equal(theirs.statusCode, 201, theirs.body);
    assert.notEqual(theirs.json().contact.contactId, contact.contactId);
    assert.deepEqual(theirs.json().contact.consent, { granted: false });
    expectError(await app.api(other.key, 'GET', `/contacts/${contact.contactId}`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(other.key, 'PATCH', `/contacts/${contact.contactId}`, { optedOut: true }), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'GET', '/contacts/ct_missing'), 404, 'M2M_NOT_FOUND');
  });

  test('bad input: invalid phone names body.phone; consent needs a source of 1..200; unknown fields; empty patch', async () => {
    const { key } = await app.tenantWithKey(['contacts:write']);
    assert.deepEqual(paths(await app.api(key, 'POST', '/contacts', { phone: '5512345678' })), ['body.phone']);
    assert.deepEqual(paths(await app.api(key, 'POST', '/contacts', { phone: '+52 55 12' })), ['body.phone']);
    assert.ok(paths(await app.api(key, 'POST', '/contacts', {})).includes('body.phone'));
    assert.ok(paths(await app.api(key, 'POST', '/contacts', { phone: nextPhone(), consent: { granted: true } })).some((p) => p.startsWith('body.consent')));
    assert.ok(paths(await app.api(key, 'POST', '/contacts', { phone: nextPhone(), consent: { granted: true, source: '' } })).some((p) => p.startsWith('body.consent')));
    assert.ok(paths(await app.api(key, 'POST', '/contacts', { phone: nextPhone(), consent: { granted: true, source: 'x'.repeat(201) } })).some((p) => p.startsWith('body.consent')));
    assert.equal((await app.api(key, 'POST', '/contacts', { phone: nextPhone(), consent: { granted: true, source: 'x'.repeat(200) } })).statusCode, 201);
    assert.deepEqual(paths(await app.api(key, 'POST', '/contacts', { phone: nextPhone(), email: 'a@b.c' })), ['body.email']);
    assert.deepEqual(paths(await app.api(key, 'POST', '/contacts?upsert=true', { phone: nextPhone() })), ['query.upsert']);
    const id = (await app.api(key, 'POST', '/contacts', { phone: nextPhone() })).json().contact.contactId;
    expectError(await app.api(key, 'PATCH', `/contacts/${id}`, {}), 400, 'M2M_INVALID_REQUEST');
    assert.deepEqual(paths(await app.api(key, 'PATCH', `/contacts/${id}`, { phone: '+525500000000' })), ['body.phone']);
    assert.ok(paths(await app.api(key, 'PATCH', `/contacts/${id}`, { consent: { granted: true } })).some((p) => p.startsWith('body.consent')));
    const { key: reader } = await app.tenantWithKey(['contacts:read']);
    expectError(await app.api(reader, 'POST', '/contacts', { phone: nextPhone() }), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
  });

  test('consent recorded here makes a conversation start possible where it answered recipient_no_consent', async () => {
    const { tenantId, key } = await app.tenantWithKey(['contacts:write', 'conversations:write']);
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp' });
    await app.admin('PUT', `/tenants/${tenantId}/channels/${channelId}/templates/conversation_start`, { category: 'UTILITY', locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
    const phone = nextPhone();
    const body = { channelId, recipientPhone: phone, locale: 'en_US', messageText: 'Your booking is confirmed.' };
    const start = () => app.api(key, 'POST', '/conversations/start', body, { 'idempotency-key': randomUUID() });

    assert.equal(expectError(await start(), 409, 'M2M_CONFLICT').details.reason, 'recipient_no_consent');
    assert.equal((await app.api(key, 'POST', '/contacts', { phone, name: 'Luis' })).statusCode, 201);
    assert.equal(expectError(await start(), 409, 'M2M_CONFLICT').details.reason, 'recipient_no_consent', 'a contact without consent is still refused');
    assert.equal((await app.api(key, 'POST', '/contacts', { phone, consent: { granted: true, source: 'booking form' } })).statusCode, 200);
    const started = await start();
    assert.equal(started.statusCode, 202, started.body);
  });
});
