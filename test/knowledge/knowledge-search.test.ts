import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import type { SourceKind } from '../../src/knowledge/repo.js';

// POST /knowledge/search (decisions 7.5): hybrid full-text and vector ranking over the tenant's visible chunks,
// each result citing its source. Visibility (active, property and global, source types) is read by the query
// itself, so a deactivated or deleted source leaves the very next answer.

let app: TestApp;
let tenant: { tenantId: string; key: string };
let propertyA: string;
let propertyB: string;
const ids: Record<string, string> = {};

interface Result {
  sourceId: string;
  websiteId?: string;
  title: string;
  url?: string;
  text: string;
  score: number;
  updatedAt: string;
}

const SOURCES: Array<{ name: string; title: string; text: string; propertyId?: 'A' | 'B'; sourceType?: 'text' | 'file' }> = [
  { name: 'checkin', title: 'Check-in and check-out', text: 'Check-in starts at 15:00 and check-out is until 11:00. Early check-in depends on availability and the front desk will store your luggage until your room is ready.' },
  { name: 'parking', title: 'Parking', text: 'Our underground garage has 40 spaces. Parking costs 18 euros per night and electric cars can charge at two stations on level -1.', propertyId: 'A' },
  { name: 'pets', title: 'Mascotas', text: 'Se admiten perros y gatos de hasta 10 kilos con un suplemento de 15 euros por noche. Las mascotas no pueden entrar en el restaurante ni en la piscina.', propertyId: 'B' },
  { name: 'breakfast', title: 'Breakfast', text: 'Breakfast is served in the garden restaurant from 7:00 to 10:30, with fresh pastries, eggs cooked to order and gluten-free options.', sourceType: 'file' },
];

async function search(body: Record<string, unknown>, key = tenant.key) {
  return app.api(key, 'POST', '/knowledge/search', body);
}

async function results(body: Record<string, unknown>, key = tenant.key): Promise<Result[]> {
  const res = await search(body, key);
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { results: Result[] }).results;
}

before(async () => {
  app = await startTestApp({ startWorkers: true });
  tenant = await app.tenantWithKey(['knowledge:read', 'knowledge:write']);
  propertyA = (await app.admin<{ propertyId: string }>('POST', `/tenants/${tenant.tenantId}/properties`, { name: 'Beach' })).propertyId;
  propertyB = (await app.admin<{ propertyId: string }>('POST', `/tenants/${tenant.tenantId}/properties`, { name: 'Mountain' })).propertyId;
  for (const source of SOURCES) {
    const propertyId = source.propertyId === 'A' ? propertyA : source.propertyId === 'B' ? propertyB : undefined;
    const body =
      source.sourceType === 'file'
        ? { sourceType: 'file', title: source.title, file: { filename: 'breakfast.txt', contentType: 'text/plain', contentBase64: Buffer.from(source.text).toString('base64') } }
        : { sourceType: 'text', title: source.title, text: source.text };
    const res = await app.api(tenant.key, 'POST', '/knowledge/sources', { ...body, ...(propertyId ? { scope: 'property', propertyId } : {}) });
    assert.equal(res.statusCode, 201, res.body);
    ids[source.name] = res.json().source.sourceId;
  }
  await eventually(async () => {
    const rows = await app.runtime.services.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM knowledge_chunks WHERE tenant_id = $1 AND embedding IS NOT NULL',
      [tenant.tenantId],
    );
    return rows[0].n >= SOURCES.length;
  }, 20_000, 'sources ingested and embedded');
});
after(async () => {
  await app.close();
});

test('a question finds the passage that answers it, citing its source', async () => {
  const found = await results({ query: 'What time can I check in?' });
  assert.ok(found.length > 0);
  const [best] = found;
  assert.equal(best.sourceId, ids.checkin);
  assert.equal(best.title, 'Check-in and check-out');
  assert.match(best.text, /15:00/);
  assert.ok(best.score > 0 && best.score <= 1);
  assert.ok(!Number.isNaN(Date.parse(best.updatedAt)));
  assert.equal(best.websiteId, undefined);
  for (let i = 1; i < found.length; i++) assert.ok(found[i - 1].score >= found[i].score, 'best first');

  const spanish = await results({ query: '¿Puedo llevar a mi perro?' });
  assert.equal(spanish[0]?.sourceId, ids.pets, 'Spanish is stemmed: perro matches perros');
  const file = await results({ query: 'when is breakfast served' });
  assert.equal(file[0]?.sourceId, ids.breakfast, 'file sources are searched (and embedded at ingestion)');
  assert.equal((await results({ query: 'parking', limit: 1 })).length, 1);
});

test('property and global knowledge; source types', async () => {
  const all = (await results({ query: 'parking garage perros breakfast check-in', limit: 20 })).map((r) => r.sourceId);
  for (const name of ['checkin', 'parking', 'pets', 'breakfast']) assert.ok(all.includes(ids[name]), name);

  const inA = (await results({ query: 'parking garage perros breakfast check-in', propertyId: propertyA, limit: 20 })).map((r) => r.sourceId);
  assert.ok(inA.includes(ids.parking) && inA.includes(ids.checkin) && inA.includes(ids.breakfast), "a property's search includes global knowledge");
  assert.ok(!inA.includes(ids.pets), "another property's knowledge is left out");

  const global = (await results({ query: 'parking garage perros breakfast check-in', propertyId: 'global', limit: 20 })).map((r) => r.sourceId);
  assert.ok(global.includes(ids.checkin) && !global.includes(ids.parking) && !global.includes(ids.pets));

  const files = (await results({ query: 'breakfast check-in parking', sourceTypes: ['file'], limit: 20 })).map((r) => r.sourceId);
  assert.deepEqual(files, [ids.breakfast]);
  assert.deepEqual(await results({ query: 'breakfast', sourceTypes: ['website', 'url'] }), []);
});

test('deactivating or deleting a source removes it from the next answer', async () => {
  const db = app.runtime.services.db;
  const extra = await app.api(tenant.key, 'POST', '/knowledge/sources', { sourceType: 'text', title: 'Spa', text: 'The spa has a sauna, a steam room and a heated indoor pool open from 9:00 to 21:00.' });
  const spaId = extra.json().source.sourceId as string;
  await eventually(async () => (await results({ query: 'sauna steam room' }))[0]?.sourceId === spaId, 20_000, 'spa searchable');

  await db.query('UPDATE knowledge_sources SET active = false WHERE id = $1', [spaId]);
  assert.ok(!(await results({ query: 'sauna steam room' })).some((r) => r.sourceId === spaId), 'inactive');
  await db.query('UPDATE knowledge_sources SET active = true WHERE id = $1', [spaId]);
  assert.equal((await results({ query: 'sauna steam room' }))[0]?.sourceId, spaId, 'active again');
  await db.query('DELETE FROM knowledge_sources WHERE id = $1', [spaId]);
  assert.ok(!(await results({ query: 'sauna steam room' })).some((r) => r.sourceId === spaId), 'deleted');
});

test("tenants are isolated; another tenant's property is 404", async () => {
  const other = await app.tenantWithKey(['knowledge:read']);
  assert.deepEqual(await results({ query: 'What time can I check in?' }, other.key), []);
  const res = await search({ query: 'parking', propertyId: propertyA }, other.key);
  assert.equal(res.statusCode, 404, res.body);
  assert.equal((await search({ query: 'parking', propertyId: 'prop_missing' })).statusCode, 404);
  const writerOnly = await app.tenantWithKey(['webhooks:read']);
  assert.equal((await search({ query: 'parking' }, writerOnly.key)).statusCode, 403);
});

test('bad input is 400; stop words and punctuation find nothing; any script answers', async () => {
  for (const body of [
    {},
    { query: '' },
    { query: '   ' },
    { query: 'x'.repeat(501) },
    { query: 'parking', unknown: true },
    { query: 'parking', limit: 0 },
    { query: 'parking', limit: 21 },
    { query: 'parking', sourceTypes: ['asset'] },
    { query: 'parking', sourceTypes: [] },
    { query: 42 },
    { query: 'a\u0000b' },
  ]) {
    const res = await search(body);
    assert.equal(res.statusCode, 400, `${JSON.stringify(body)}: ${res.body}`);
    assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST');
  }
  assert.equal((await search({ query: '😀'.repeat(500) })).statusCode, 200, '500 code points is the limit, not 500 UTF-16 units');
  for (const query of ['the of and is', 'el la de que', '?!... ---', '"" ()', '-', 'or', '!!!', "'"]) {
    assert.deepEqual(await results({ query }), [], query);
  }
  for (const query of ['🏊‍♀️ 🅿️?', 'هل يوجد موقف للسيارات؟', '停车场在哪里？', 'パーキング', 'Где парковка?', 'check-in 🙂 停车', 'a & b | !c <-> d:*', "'quoted' \\\\ back"]) {
    const res = await search({ query });
    assert.equal(res.statusCode, 200, `${query}: ${res.body}`);
  }
});

test('the MCP tool search_knowledge is declared from the catalogue', async () => {
  const { OPERATIONS, toolName } = await import('../../src/operations/catalogue.js');
  const operation = OPERATIONS.find((o) => o.operationId === 'searchKnowledge');
  assert.ok(operation);
  assert.equal(toolName(operation.operationId), 'search_knowledge');
  assert.equal(operation.readOnly, true);
  const res = await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1/openapi.json' });
  const spec = res.json() as { paths: Record<string, Record<string, Record<string, unknown>>> };
  assert.equal(spec.paths['/knowledge/search']?.post?.['x-extension'], true);
});

test('a tenant is counted as small or large unless a search lately found it large', async () => {
  const { searchRepo } = await import('../../src/knowledge/search/search-repo.js');
  const { LargeTenants } = await import('../../src/knowledge/search/large-tenants.js');
  const kinds: SourceKind[] = ['text', 'file', 'url', 'website_page'];
  const params = { tenantId: tenant.tenantId, query: 'underground parking garage', propertyId: undefined, kinds };
  const counted = await searchRepo.search(app.runtime.services.db, { ...params, knownLarge: false });
  assert.ok(counted.some((row) => row.source_id === ids.parking && row.term_ranks !== null), 'the parking passage is a keyword candidate');
  assert.equal(counted[0]?.large, false, 'four chunks: small');
  const known = await searchRepo.search(app.runtime.services.db, { ...params, knownLarge: true });
  assert.ok(known.some((row) => row.source_id === ids.parking && row.term_ranks !== null), 'searched as a large tenant: the same passage');
  assert.equal(known[0]?.large, true);

  const large = new LargeTenants(1000);
  assert.equal(large.has('tn_a', 0), false);
  large.record('tn_a', true, 0);
  assert.equal(large.has('tn_a', 999), true);
  assert.equal(large.has('tn_a', 1000), false, 'counted again once the time is up');
  large.record('tn_a', true, 2000);
  large.record('tn_a', false, 2500);
  assert.equal(large.has('tn_a', 2600), false, 'a count that finds it small forgets it');
});
