// The knowledge rows an integrator reads and changes by id (decisions 7.4): asset folders listed and read,
// one source read, renamed, switched off and deleted, one website read with its recrawl schedule.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { b64, buildPng } from '../fixtures/knowledge/build.js';
import { chunksOf, ingested, listItems, validated } from '../fixtures/knowledge/helpers.js';
import { html, page, prose, startSite, type FixtureSite } from '../fixtures/site/server.js';
import { addWebsite, finished, websiteItem } from '../fixtures/site/helpers.js';

let app: TestApp;
let site: FixtureSite;
const RW = ['knowledge:write'];

before(async () => {
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', DATA_DIR: 'memory://', CRAWL_FETCH_TIMEOUT_MS: '2000' } });
  site = await startSite({
    '/': html(page('Hotel Sol', prose('Welcome to Hotel Sol'), ['/spa'])),
    '/spa': html(page('Spa', prose('The sauna and steam room open at nine'))),
  });
});
after(async () => {
  await app.close();
  await site.close();
});

type Json = Record<string, unknown>;

async function ok<T = Json>(key: string, method: string, url: string, body?: unknown, status = 200): Promise<T> {
  const res = await app.api(key, method, url, body);
  assert.equal(res.statusCode, status, `${method} ${url}: ${res.body}`);
  return (res.body ? res.json() : undefined) as T;
}

async function refused(key: string, method: string, url: string, body: unknown, status: number, code: string) {
  const res = await app.api(key, method, url, body);
  assert.equal(res.statusCode, status, `${method} ${url}: ${res.body}`);
  assert.equal(res.json().error.code, code);
  return res.json().error as { code: string; message: string; details: Json };
}

async function textSource(key: string, title: string, text: string) {
  return (await ok<{ source: { sourceId: string } }>(key, 'POST', '/knowledge/sources', { sourceType: 'text', title, text }, 201)).source.sourceId;
}

async function inventoryItem(key: string, sourceId: string) {
  const items = (await listItems(app, key, { limit: 200 })).json().items as Json[];
  return items.find((i) => i.sourceId === sourceId);
}

async function searchIds(key: string, query: string): Promise<string[]> {
  return (await ok<{ results: Array<{ sourceId: string }> }>(key, 'POST', '/knowledge/search', { query })).results.map((r) => r.sourceId);
}

test('asset folders: listed newest first with keyset pages, empty ones included, one read as created', async () => {
  const { tenantId, key } = await app.tenantWithKey(RW);
  const other = await app.tenantWithKey(RW);
  const reader = await app.tenantWithKey(['knowledge:read']);
  assert.deepEqual(await ok(key, 'GET', '/knowledge/asset-folders'), { folders: [] });

  const created = [];
  for (const title of ['Room photos', 'Menus', 'Spa']) created.push((await ok<{ folder: Json & { folderId: string } }>(key, 'POST', '/knowledge/asset-folders', { title }, 201)).folder);
  const [empty, menus, spa] = created;
  const asset = await app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/assets`, {
    title: 'Lunch',
    filename: 'lunch.png',
    contentType: 'image/png',
    contentBase64: b64(buildPng()),
    folderId: menus.folderId,
  });

  const first = await ok<{ folders: Array<Json & { folderId: string }>; nextCursor?: string }>(key, 'GET', '/knowledge/asset-folders?limit=2');
  assert.deepEqual(first.folders.map((f) => f.folderId), [spa.folderId, menus.folderId]);
  assert.ok(first.nextCursor);
  const second = await ok<{ folders: Array<Json & { folderId: string }>; nextCursor?: string }>(key, 'GET', `/knowledge/asset-folders?limit=2&cursor=${encodeURIComponent(first.nextCursor)}`);
  assert.deepEqual(second.folders.map((f) => f.folderId), [empty.folderId]);
  assert.equal(second.nextCursor, undefined);
  assert.deepEqual(second.folders[0], empty, 'an empty folder reads as its creation answered it');
  assert.deepEqual(first.folders[1].assetOrder, [asset.sourceId]);
  assert.equal(first.folders[1].assetCount, 1);

  // One folder: the same shape, for a read-only key too.
  assert.deepEqual(await ok(reader.key, 'GET', '/knowledge/asset-folders'), { folders: [] }, 'another tenant sees none');
  assert.deepEqual((await ok<{ folder: Json }>(key, 'GET', `/knowledge/asset-folders/${empty.folderId}`)).folder, empty);
  assert.deepEqual((await ok<{ folder: Json }>(key, 'GET', `/knowledge/asset-folders/${menus.folderId}`)).folder, first.folders[1]);
  const missing = await refused(key, 'GET', '/knowledge/asset-folders/fld_missing', undefined, 404, 'M2M_NOT_FOUND');
  const foreign = await refused(other.key, 'GET', `/knowledge/asset-folders/${menus.folderId}`, undefined, 404, 'M2M_NOT_FOUND');
  assert.deepEqual(foreign, missing, "another business's folder is a missing one");

  // Limits at both edges, unknown parameters, cursors that are not ours.
  assert.equal((await ok<{ folders: Json[] }>(key, 'GET', '/knowledge/asset-folders?limit=1')).folders.length, 1);
  assert.equal((await ok<{ folders: Json[] }>(key, 'GET', '/knowledge/asset-folders?limit=200')).folders.length, 3);
  for (const query of ['limit=0', 'limit=201', 'limit=abc', 'colour=red', 'cursor=']) await refused(key, 'GET', `/knowledge/asset-folders?${query}`, undefined, 400, 'M2M_INVALID_REQUEST');
  await refused(key, 'GET', `/knowledge/asset-folders?cursor=${encodeURIComponent(`${first.nextCursor}x`)}`, undefined, 400, 'M2M_INVALID_CURSOR');
  await refused(other.key, 'GET', `/knowledge/asset-folders?cursor=${encodeURIComponent(first.nextCursor)}`, undefined, 400, 'M2M_INVALID_CURSOR');
  await refused(key, 'GET', `/knowledge/asset-folders/${empty.folderId}?colour=red`, undefined, 400, 'M2M_INVALID_REQUEST');
  const crm = await app.tenantWithKey(['crm:sales:read']);
  await refused(crm.key, 'GET', '/knowledge/asset-folders', undefined, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
});

test('a text source: read as the inventory lists it, switched off (out of answers at once, no activeTokens), renamed, deleted', async () => {
  const { tenantId, key } = await app.tenantWithKey(RW);
  const other = await app.tenantWithKey(RW);
  const id = await textSource(key, 'Parking', 'Guests park in the underground garage for 15 EUR a night; the entrance is on Calle Sol.');
  await ingested(app, tenantId, id);
  const listed = await inventoryItem(key, id);
  const read = await ok<{ source: Json }>(key, 'GET', `/knowledge/sources/${id}`);
  assert.deepEqual(read, { source: listed });
  assert.ok((listed?.activeTokens as number) > 0);
  assert.deepEqual(await searchIds(key, 'underground garage parking'), [id]);

  const off = await ok<{ source: Json }>(key, 'PATCH', `/knowledge/sources/${id}`, { active: false });
  assert.equal(off.source.active, false);
  assert.equal(off.source.activeTokens, 0);
  assert.deepEqual(await searchIds(key, 'underground garage parking'), [], 'an inactive source leaves the answers at once');
  assert.deepEqual(await inventoryItem(key, id), off.source, 'the inventory follows');
  assert.deepEqual((await listItems(app, key, { status: 'active' })).json().items, []);
  const on = await ok<{ source: Json }>(key, 'PATCH', `/knowledge/sources/${id}`, { active: true, title: 'Parking and garage' });
  assert.equal(on.source.title, 'Parking and garage');
  assert.equal(on.source.activeTokens, listed?.activeTokens);
  assert.deepEqual(await searchIds(key, 'underground garage parking'), [id]);
  assert.deepEqual((await listItems(app, key, { query: 'garage' })).json().items.map((i: Json) => i.sourceId), [id], 'the new title is searchable');
  const repeated = await ok<{ source: Json }>(key, 'PATCH', `/knowledge/sources/${id}`, { active: true });
  assert.deepEqual({ ...repeated.source, updatedAt: undefined }, { ...on.source, updatedAt: undefined }, 'the same PATCH again changes nothing but updatedAt');

  // Bad input: an empty body, unknown fields, titles at both edges.
  await refused(key, 'PATCH', `/knowledge/sources/${id}`, {}, 400, 'M2M_INVALID_REQUEST');
  await refused(key, 'PATCH', `/knowledge/sources/${id}`, { active: false, colour: 'red' }, 400, 'M2M_INVALID_REQUEST');
  await refused(key, 'PATCH', `/knowledge/sources/${id}`, { title: '' }, 400, 'M2M_INVALID_REQUEST');
  await refused(key, 'PATCH', `/knowledge/sources/${id}`, { title: 'x'.repeat(161) }, 400, 'M2M_INVALID_REQUEST');
  await refused(key, 'PATCH', `/knowledge/sources/${id}`, { active: 'no' }, 400, 'M2M_INVALID_REQUEST');
  assert.equal((await ok<{ source: Json }>(key, 'PATCH', `/knowledge/sources/${id}`, { title: 'x'.repeat(160) })).source.title, 'x'.repeat(160));
  await refused(key, 'GET', `/knowledge/sources/${id}?colour=red`, undefined, 400, 'M2M_INVALID_REQUEST');
  await refused(key, 'DELETE', `/knowledge/sources/${id}?colour=red`, undefined, 400, 'M2M_INVALID_REQUEST');

  // Another business's source is a missing one, for every verb.
  const missing = await refused(key, 'GET', '/knowledge/sources/ks_missing', undefined, 404, 'M2M_NOT_FOUND');
  assert.equal(missing.message, 'source not found');
  assert.deepEqual(await refused(other.key, 'GET', `/knowledge/sources/${id}`, undefined, 404, 'M2M_NOT_FOUND'), missing);
  assert.deepEqual(await refused(other.key, 'PATCH', `/knowledge/sources/${id}`, { active: false }, 404, 'M2M_NOT_FOUND'), missing);
  assert.deepEqual(await refused(other.key, 'DELETE', `/knowledge/sources/${id}`, undefined, 404, 'M2M_NOT_FOUND'), missing);
  assert.equal((await ok<{ source: Json }>(key, 'GET', `/knowledge/sources/${id}`)).source.active, true, 'untouched by the other business');

  const reader = await app.tenantWithKey(['knowledge:read']);
  await refused(reader.key, 'PATCH', `/knowledge/sources/${id}`, { active: false }, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
  await refused(reader.key, 'DELETE', `/knowledge/sources/${id}`, undefined, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');

  assert.ok((await chunksOf(app, id)).length > 0);
  await ok(key, 'DELETE', `/knowledge/sources/${id}`, undefined, 204);
  assert.deepEqual(await chunksOf(app, id), [], 'its chunks went with it');
  assert.deepEqual(await searchIds(key, 'underground garage parking'), []);
  assert.equal(await inventoryItem(key, id), undefined);
  assert.deepEqual(await refused(key, 'GET', `/knowledge/sources/${id}`, undefined, 404, 'M2M_NOT_FOUND'), missing);
  await refused(key, 'DELETE', `/knowledge/sources/${id}`, undefined, 404, 'M2M_NOT_FOUND');
});

test('a source deleted before its ingestion ran: the job finds nothing and ends without error', async () => {
  const { key } = await app.tenantWithKey(RW);
  const id = await textSource(key, 'Gone soon', 'Breakfast is served from seven to eleven in the garden room.');
  await ok(key, 'DELETE', `/knowledge/sources/${id}`, undefined, 204);
  const [job] = await eventually(async () => {
    const rows = await app.runtime.services.db.query<{ state: string }>(`SELECT state FROM jobs WHERE task = 'knowledge.ingest' AND dedupe_key = $1`, [id]);
    return rows.length === 1 && rows[0].state !== 'queued' && rows[0].state !== 'running' ? rows : undefined;
  }, 10_000, 'the ingest job');
  assert.equal(job.state, 'succeeded');
  assert.deepEqual(await chunksOf(app, id), []);
});

test('an asset source: read as {asset}, switched off and renamed as {source}, deleted with its bytes and its place in the folder', async () => {
  const { tenantId, key } = await app.tenantWithKey(RW);
  const folder = (await ok<{ folder: { folderId: string } }>(key, 'POST', '/knowledge/asset-folders', { title: 'Rooms' }, 201)).folder;
  const upload = (title: string) =>
    app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/assets`, { title, filename: 'room.png', contentType: 'image/png', contentBase64: b64(buildPng()), folderId: folder.folderId });
  const [first, second] = [await upload('Deluxe'), await upload('Suite')];
  await validated(app, tenantId, first.sourceId);
  await validated(app, tenantId, second.sourceId);

  const listed = await inventoryItem(key, first.sourceId);
  const read = await ok<{ asset: Json }>(key, 'GET', `/knowledge/sources/${first.sourceId}`);
  assert.deepEqual(read, { asset: listed?.asset });
  assert.equal(read.asset.validationStatus, 'ready');

  const renamed = await ok<{ source: Json & { asset: Json } }>(key, 'PATCH', `/knowledge/sources/${first.sourceId}`, { title: 'Deluxe room', active: false });
  assert.equal(renamed.source.sourceType, 'file');
  assert.equal(renamed.source.asset.title, 'Deluxe room');
  assert.equal(renamed.source.asset.active, false);
  assert.deepEqual(renamed.source, await inventoryItem(key, first.sourceId));

  const blobs = app.runtime.services.blobs;
  assert.ok(await blobs.get(`${tenantId}/${first.sourceId}`));
  await ok(key, 'DELETE', `/knowledge/sources/${first.sourceId}`, undefined, 204);
  assert.equal(await blobs.get(`${tenantId}/${first.sourceId}`), undefined, 'its bytes went with it');
  const after = (await ok<{ folder: { assetOrder: string[]; assetCount: number } }>(key, 'GET', `/knowledge/asset-folders/${folder.folderId}`)).folder;
  assert.deepEqual(after.assetOrder, [second.sourceId]);
  assert.equal(after.assetCount, 1);
  assert.ok(await blobs.get(`${tenantId}/${second.sourceId}`), 'the other asset keeps its bytes');
});

test('a website: read with its recrawl schedule as the PATCH answers; its own source and its pages are not edited as sources', async () => {
  const { tenantId, key } = await app.tenantWithKey(RW);
  const other = await app.tenantWithKey(RW);
  const created = await addWebsite(app, tenantId, { rootUrl: `${site.origin}/`, crawlDepth: 2, maxPages: 10 });
  await finished(app, key, created.latestJob.jobId);

  const read = await ok<{ website: Json; recrawlIntervalHours: number | null; nextCrawlAt?: string }>(key, 'GET', `/knowledge/websites/${created.websiteId}`);
  assert.deepEqual(read, { website: await websiteItem(app, key, created.websiteId), recrawlIntervalHours: null });
  const patched = await ok(key, 'PATCH', `/knowledge/websites/${created.websiteId}`, { recrawlIntervalHours: 24 });
  const again = await ok<{ recrawlIntervalHours: number; nextCrawlAt: string }>(key, 'GET', `/knowledge/websites/${created.websiteId}`);
  assert.deepEqual(again, patched, 'the same envelope as the PATCH answer');
  assert.equal(again.recrawlIntervalHours, 24);
  assert.ok(Date.parse(again.nextCrawlAt) > Date.now());

  const missing = await refused(key, 'GET', '/knowledge/websites/web_missing', undefined, 404, 'M2M_NOT_FOUND');
  assert.deepEqual(await refused(other.key, 'GET', `/knowledge/websites/${created.websiteId}`, undefined, 404, 'M2M_NOT_FOUND'), missing);
  await refused(key, 'GET', `/knowledge/websites/${created.websiteId}?colour=red`, undefined, 400, 'M2M_INVALID_REQUEST');

  // The website's own row: read and edited as a website.
  for (const [method, body] of [['GET', undefined], ['PATCH', { active: false }], ['DELETE', undefined]] as const) {
    const error = await refused(key, method, `/knowledge/sources/${created.sourceId}`, body, 409, 'M2M_CONFLICT');
    assert.deepEqual(error.details, { reason: 'website_source', websiteId: created.websiteId }, method);
  }
  // A crawled page reads as a source of its website; it follows the crawls and selection rules, not edits.
  const pages = (await websiteItem(app, key, created.websiteId)).pages;
  assert.equal(pages.length, 2);
  const spa = pages.find((p) => p.path === '/spa')!;
  const pageSource = (await ok<{ source: Json }>(key, 'GET', `/knowledge/sources/${spa.sourceId}`)).source;
  assert.equal(pageSource.websiteId, created.websiteId);
  assert.equal(pageSource.websiteGenerationState, 'current');
  assert.equal(pageSource.canonicalUrl, spa.canonicalUrl);
  for (const [method, body] of [['PATCH', { title: 'Spa' }], ['DELETE', undefined]] as const) {
    const error = await refused(key, method, `/knowledge/sources/${spa.sourceId}`, body, 409, 'M2M_CONFLICT');
    assert.deepEqual(error.details, { reason: 'website_page', websiteId: created.websiteId }, method);
  }
  await refused(other.key, 'GET', `/knowledge/sources/${spa.sourceId}`, undefined, 404, 'M2M_NOT_FOUND');
  assert.ok((await searchIds(key, 'sauna steam room')).includes(spa.sourceId), 'the page is still answered from');
});
