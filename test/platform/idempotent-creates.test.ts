import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';

// Every POST that creates honours Idempotency-Key: a retry replays the first answer and never creates twice.

let app: TestApp;
before(async () => {
  app = await startTestApp({ env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
});
after(() => app.close());

test('a retried create with the same key replays the first answer; another body under it is 409', async () => {
  const { key } = await app.tenantWithKey(['webhooks:write', 'messages:read', 'knowledge:write']);
  const body = { url: 'https://127.0.0.1:9/a', events: ['message.delivery.updated'] };
  const first = await app.api(key, 'POST', '/webhooks', body, { 'idempotency-key': 'sub-1' });
  const second = await app.api(key, 'POST', '/webhooks', body, { 'idempotency-key': 'sub-1' });
  assert.equal(first.statusCode, 201);
  assert.equal(second.statusCode, 201);
  assert.equal(second.headers['idempotent-replayed'], 'true');
  assert.equal(first.headers['idempotent-replayed'], undefined);
  assert.deepEqual(second.json(), first.json(), 'the same subscription and the same secret');
  const other = await app.api(key, 'POST', '/webhooks', { ...body, url: 'https://127.0.0.1:9/b' }, { 'idempotency-key': 'sub-1' });
  assert.equal(other.statusCode, 409);
  assert.equal(other.json().error.code, 'M2M_IDEMPOTENCY_CONFLICT');
  assert.equal((await app.api(key, 'GET', '/webhooks')).json().subscriptions.length, 1);

  const without = [await app.api(key, 'POST', '/webhooks', body), await app.api(key, 'POST', '/webhooks', body)];
  assert.notEqual(without[0].json().subscriptionId, without[1].json().subscriptionId, 'no key: two creates');

  const folder = { title: 'Photos' };
  const f1 = await app.api(key, 'POST', '/knowledge/asset-folders', folder, { 'idempotency-key': 'folder-1' });
  const f2 = await app.api(key, 'POST', '/knowledge/asset-folders', folder, { 'idempotency-key': 'folder-1' });
  assert.equal(f1.json().folder.folderId, f2.json().folder.folderId);
  const source = { sourceType: 'text', title: 'Hours', text: 'Reception is open 24 hours.' };
  const s1 = await app.api(key, 'POST', '/knowledge/sources', source, { 'idempotency-key': 'source-1' });
  const s2 = await app.api(key, 'POST', '/knowledge/sources', source, { 'idempotency-key': 'source-1' });
  assert.equal(s1.statusCode, 201);
  assert.equal(s1.json().source.sourceId, s2.json().source.sourceId);
});

test('identical creates racing under one key make one record', async () => {
  const { key } = await app.tenantWithKey(['webhooks:write', 'messages:read']);
  const body = { url: 'https://127.0.0.1:9/race', events: ['message.delivery.updated'] };
  const answers = await Promise.all(Array.from({ length: 6 }, () => app.api(key, 'POST', '/webhooks', body, { 'idempotency-key': 'race' })));
  const created = answers.filter((res) => res.statusCode === 201).map((res) => res.json().subscriptionId);
  for (const res of answers) assert.ok(res.statusCode === 201 || (res.statusCode === 409 && res.json().error.code === 'M2M_IDEMPOTENCY_CONFLICT'), res.body);
  assert.ok(created.length >= 1);
  assert.equal(new Set(created).size, 1, 'every 201 names the same subscription');
  assert.equal((await app.api(key, 'GET', '/webhooks')).json().subscriptions.length, 1);
});

test('a create refused by a rule releases the key for a corrected request', async () => {
  const { key } = await app.tenantWithKey(['webhooks:write', 'messages:read']);
  // message.created needs conversations:read, which the key lacks: 403, nothing stored under the key.
  const refused = await app.api(key, 'POST', '/webhooks', { url: 'https://127.0.0.1:9/x', events: ['message.created'] }, { 'idempotency-key': 'fix-me' });
  assert.equal(refused.statusCode, 403);
  const corrected = await app.api(key, 'POST', '/webhooks', { url: 'https://127.0.0.1:9/x', events: ['message.delivery.updated'] }, { 'idempotency-key': 'fix-me' });
  assert.equal(corrected.statusCode, 201, corrected.body);
  assert.equal(corrected.headers['idempotent-replayed'], undefined);
});
