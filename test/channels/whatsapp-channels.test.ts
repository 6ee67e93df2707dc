import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';

// Channels are real connections (decisions 7.1): provider fixed at creation, connection validated per provider,
// tokens encrypted at rest and never answered, PATCH of name, availability and connection.

let app: TestApp;
let tenantId: string;
let seq = 0;
const nextId = () => String(555000111000 + ++seq);

before(async () => {
  app = await startTestApp({ env: { META_SYSTEM_USER_TOKEN: 'system-token' } });
  tenantId = (await app.tenantWithKey([])).tenantId;
});
after(async () => {
  await app.close();
});

const create = (body: Record<string, unknown>) => app.adminRaw('POST', `/tenants/${tenantId}/channels`, body);

test('a channel created without a connection is sandbox and connected', async () => {
  const res = await create({ kind: 'whatsapp', name: 'Sandbox line' });
  assert.equal(res.statusCode, 201, res.body);
  const channel = res.json() as Record<string, unknown>;
  assert.equal(channel.provider, 'sandbox');
  assert.deepEqual(channel.connection, { status: 'connected' });
});

test('whatsapp_cloud: ids answered, the token never; sealed at rest; the system token connects a channel without its own', async () => {
  const phoneNumberId = nextId();
  const res = await create({ kind: 'whatsapp', name: 'Cloud', provider: 'whatsapp_cloud', connection: { phoneNumberId, wabaId: '777', accessToken: 'EAAG-secret-token' } });
  assert.equal(res.statusCode, 201, res.body);
  assert.ok(!res.body.includes('EAAG-secret-token'));
  const channel = res.json() as { channelId: string; provider: string; connection: Record<string, unknown> };
  assert.equal(channel.provider, 'whatsapp_cloud');
  assert.deepEqual(channel.connection, { phoneNumberId, wabaId: '777', status: 'connected' });
  const [row] = await app.runtime.services.db.query<{ connection_secret: string; connection: unknown }>('SELECT connection_secret, connection FROM channels WHERE id = $1', [channel.channelId]);
  assert.ok(row.connection_secret.startsWith('v1.'));
  assert.ok(!row.connection_secret.includes('EAAG'));
  assert.ok(!JSON.stringify(row.connection).includes('EAAG'));

  const without = await create({ kind: 'whatsapp', name: 'Cloud 2', provider: 'whatsapp_cloud', connection: { phoneNumberId: nextId(), wabaId: '777' } });
  assert.equal(without.statusCode, 201, without.body);
  assert.equal((without.json() as { connection: { status: string } }).connection.status, 'connected');
});

test('validation: provider and kind agree, required fields, no foreign fields, exact origins, one channel per phone-number id', async () => {
  const cases: Array<[Record<string, unknown>, number, string]> = [
    [{ kind: 'messenger', name: 'x', provider: 'whatsapp_cloud', connection: { phoneNumberId: nextId(), wabaId: '1' } }, 400, 'body.provider'],
    [{ kind: 'whatsapp', name: 'x', provider: 'whatsapp_cloud' }, 400, 'body.connection'],
    [{ kind: 'whatsapp', name: 'x', provider: 'whatsapp_cloud', connection: { phoneNumberId: nextId() } }, 400, 'body.connection.wabaId'],
    [{ kind: 'whatsapp', name: 'x', provider: 'whatsapp_cloud', connection: { phoneNumberId: nextId(), wabaId: '1', pageId: '2' } }, 400, 'body.connection.pageId'],
    [{ kind: 'whatsapp', name: 'x', connection: { phoneNumberId: nextId(), wabaId: '1' } }, 400, 'body.connection'],
    [{ kind: 'webchat', name: 'x', provider: 'webchat', connection: { allowedOrigins: ['https://hotel.example/path'] } }, 400, 'body.connection.allowedOrigins'],
    [{ kind: 'messenger', name: 'x', provider: 'messenger', connection: { pageId: '12' } }, 400, 'body.connection.pageAccessToken'],
  ];
  for (const [body, status, path] of cases) {
    const res = await create(body);
    assert.equal(res.statusCode, status, `${JSON.stringify(body)} → ${res.body}`);
    assert.ok(res.body.includes(path), `${path} named in ${res.body}`);
  }
  const phoneNumberId = nextId();
  assert.equal((await create({ kind: 'whatsapp', name: 'a', provider: 'whatsapp_cloud', connection: { phoneNumberId, wabaId: '1' } })).statusCode, 201);
  const taken = await create({ kind: 'whatsapp', name: 'b', provider: 'whatsapp_cloud', connection: { phoneNumberId, wabaId: '1' } });
  assert.equal(taken.statusCode, 409, taken.body);
});

test('messenger, instagram and webchat shapes are accepted (behaviour comes with their providers); webchat answers a widgetId', async () => {
  const messenger = await create({ kind: 'messenger', name: 'Page', provider: 'messenger', connection: { pageId: nextId(), pageAccessToken: 'page-token' } });
  assert.equal(messenger.statusCode, 201, messenger.body);
  assert.ok(!messenger.body.includes('page-token'));
  const instagram = await create({ kind: 'instagram', name: 'IG', provider: 'instagram', connection: { instagramAccountId: nextId(), accessToken: 'ig-token' } });
  assert.equal(instagram.statusCode, 201, instagram.body);
  const webchat = await create({ kind: 'webchat', name: 'Site', provider: 'webchat', connection: { allowedOrigins: ['https://hotel.example'] } });
  assert.equal(webchat.statusCode, 201, webchat.body);
  const widgetId = (webchat.json() as { widgetId?: string }).widgetId;
  assert.ok(widgetId && widgetId.length >= 20);
});

test('PATCH changes name, availability and connection; the token is kept when left out; the provider stays', async () => {
  const phoneNumberId = nextId();
  const created = (await create({ kind: 'whatsapp', name: 'Old', provider: 'whatsapp_cloud', connection: { phoneNumberId, wabaId: '1', accessToken: 'tok-1' } })).json() as { channelId: string };
  const newId = nextId();
  const res = await app.adminRaw('PATCH', `/tenants/${tenantId}/channels/${created.channelId}`, { name: 'New', available: false, connection: { phoneNumberId: newId } });
  assert.equal(res.statusCode, 200, res.body);
  const channel = res.json() as { name: string; available: boolean; provider: string; connection: Record<string, unknown> };
  assert.equal(channel.name, 'New');
  assert.equal(channel.available, false);
  assert.equal(channel.provider, 'whatsapp_cloud');
  assert.deepEqual(channel.connection, { phoneNumberId: newId, wabaId: '1', status: 'connected' });
  const [row] = await app.runtime.services.db.query<{ provider_ref: string; connection_secret: string }>('SELECT provider_ref, connection_secret FROM channels WHERE id = $1', [created.channelId]);
  assert.equal(row.provider_ref, newId);
  assert.ok(row.connection_secret);
  assert.equal((await app.adminRaw('PATCH', `/tenants/${tenantId}/channels/${created.channelId}`, { provider: 'sandbox' })).statusCode, 400);
  assert.equal((await app.adminRaw('PATCH', `/tenants/${tenantId}/channels/ch_missing`, { name: 'x' })).statusCode, 404);
});

test('channels of the CHANNEL_PROVIDER release: CHANNEL_PROVIDER=whatsapp at start makes them whatsapp_cloud once; otherwise they stay sandbox', async () => {
  const { adoptLegacyChannels } = await import('../../src/channels/legacy.js');
  const db = app.runtime.services.db;
  const make = async (name: string, ref: string) => {
    const { channelId } = (await create({ kind: 'whatsapp', name })).json() as { channelId: string };
    await db.query('UPDATE channels SET provider_ref = $2, legacy_sender = true WHERE id = $1', [channelId, ref]);
    return channelId;
  };
  const ref = nextId();
  const kept = await make('Legacy', ref);
  assert.equal(await adoptLegacyChannels(db, 'whatsapp'), 1);
  const [row] = await db.query<{ provider: string; connection: Record<string, string>; legacy_sender: boolean }>('SELECT provider, connection, legacy_sender FROM channels WHERE id = $1', [kept]);
  assert.deepEqual(row, { provider: 'whatsapp_cloud', connection: { phoneNumberId: ref, wabaId: '' }, legacy_sender: false });
  const sandbox = await make('Legacy sandbox', nextId());
  assert.equal(await adoptLegacyChannels(db, undefined), 0);
  const [after] = await db.query<{ provider: string; legacy_sender: boolean }>('SELECT provider, legacy_sender FROM channels WHERE id = $1', [sandbox]);
  assert.deepEqual(after, { provider: 'sandbox', legacy_sender: false });
});
