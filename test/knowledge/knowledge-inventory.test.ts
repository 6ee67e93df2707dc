import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { newId } from '../../src/ids.js';
import { websiteRepo } from '../../src/knowledge/website-repo.js';
import { b64, buildPng } from '../fixtures/knowledge/build.js';
import { READ, addProperty, listItems, textSource } from '../fixtures/knowledge/helpers.js';

let app: TestApp;

before(async () => {
  app = await startTestApp({ env: { DATA_DIR: 'memory://' } });
});
after(() => app.close());

const SOURCE_FIELDS = [
  'sourceId', 'sourceType', 'title', 'active', 'updatedAt', 'text', 'url', 'chunkCount', 'activeTokens', 'scope', 'propertyId', 'propertyName',
  'preview', 'originalFile', 'asset', 'createdAt', 'createdBy', 'websiteId', 'websiteGenerationId', 'canonicalUrl', 'websiteGenerationState',
];
const WEBSITE_FIELDS = [
  'websiteId', 'sourceId', 'sourceType', 'active', 'scope', 'title', 'url', 'rootUrl', 'normalizedRootUrl', 'chunkCount', 'activeTokens',
  'selectedTokens', 'createdBy', 'crawlDepth', 'maxPages', 'propertyId', 'propertyName', 'status', 'defaultEnabled', 'selectionRules',
  'currentGenerationId', 'latestJob', 'totalPages', 'enabledPages', 'pages', 'createdAt', 'updatedAt', 'lastCrawledAt',
];
const WEBSITE_REQUIRED = [
  'websiteId', 'sourceId', 'sourceType', 'active', 'scope', 'title', 'url', 'chunkCount', 'rootUrl', 'normalizedRootUrl', 'crawlDepth', 'maxPages',
  'status', 'defaultEnabled', 'selectionRules', 'totalPages', 'enabledPages',
];
const PAGE_FIELDS = ['sourceId', 'url', 'canonicalUrl', 'path', 'enabled', 'chunkCount', 'tokens', 'displayOrder', 'updatedAt'];
const ASSET_FIELDS = [
  'sourceId', 'title', 'description', 'mediaType', 'contentType', 'filename', 'sizeBytes', 'active', 'validationStatus', 'validationFindings',
  'propertyId', 'propertyName', 'folderId',
];

function assertOnly(object: Record<string, unknown>, allowed: string[], what: string) {
  const extra = Object.keys(object).filter((k) => !allowed.includes(k));
  assert.deepEqual(extra, [], `${what} has properties the spec does not list`);
}

/** A website with a current generation (3 pages, one disabled) and a staging generation whose page must not show. */
async function seedWebsite(tenantId: string, options: { title?: string; propertyId?: string | null; active?: boolean } = {}) {
  const db = app.runtime.services.db;
  const websiteId = newId('web');
  const sourceId = newId('ks');
  const current = newId('wgen');
  const staging = newId('wgen');
  const createdBy = { id: 'admin', displayName: 'Admin API' };
  const now = new Date();
  const pages: string[] = [];
  await db.transaction(async (tx) => {
    await websiteRepo.insert(tx, {
      id: websiteId, sourceId, tenantId, title: options.title ?? 'Hotel Sol website', rootUrl: 'https://hotel-sol.example/', normalizedRootUrl: 'https://hotel-sol.example/',
      crawlDepth: 2, maxPages: 50, propertyId: options.propertyId ?? null, active: options.active, selectionRules: [{ kind: 'path', key: '/blog', enabled: false }],
      createdBy, now,
    });
    await websiteRepo.insertGeneration(tx, { id: current, tenantId, websiteId, state: 'current', now });
    await websiteRepo.insertGeneration(tx, { id: staging, tenantId, websiteId, state: 'staging', now });
    for (const [i, path] of ['/', '/rooms', '/blog/news'].entries()) {
      const id = newId('ks');
      pages.push(id);
      await websiteRepo.insertPage(tx, {
        id, tenantId, websiteId, generationId: current, title: path, url: `https://hotel-sol.example${path}`, canonicalUrl: `https://hotel-sol.example${path}`,
        path, enabled: path !== '/blog/news', displayOrder: i, propertyId: options.propertyId ?? null, createdBy, now,
      });
      await tx.query('UPDATE knowledge_sources SET chunk_count = $2, tokens = $3 WHERE id = $1', [id, i + 1, 100 * (i + 1)]);
    }
    await websiteRepo.insertPage(tx, {
      id: newId('ks'), tenantId, websiteId, generationId: staging, title: 'new', url: 'https://hotel-sol.example/new', canonicalUrl: 'https://hotel-sol.example/new',
      path: '/new', enabled: true, propertyId: null, createdBy, now,
    });
  });
  return { websiteId, sourceId, pages, current };
}

test('each item has exactly the fields of the spec; a website is one item with its pages', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  const propertyId = await addProperty(app, tenantId);
  await textSource(app, tenantId, { title: 'Welcome', text: 'Hello and welcome.', propertyId });
  await app.admin('POST', `/tenants/${tenantId}/knowledge/assets`, { title: 'Logo', filename: 'logo.png', contentType: 'image/png', contentBase64: b64(buildPng()) });
  const site = await seedWebsite(tenantId, { propertyId });

  const body = (await listItems(app, key)).json();
  assert.deepEqual(Object.keys(body), ['items'], 'a last page has no nextCursor');
  assert.equal(body.items.length, 3, 'website pages never appear as items of their own');
  const [website, asset, text] = body.items;

  assertOnly(website, WEBSITE_FIELDS, 'website item');
  for (const field of WEBSITE_REQUIRED) assert.ok(field in website, `website item lacks ${field}`);
  assert.equal(website.sourceType, 'website');
  assert.equal(website.websiteId, site.websiteId);
  assert.equal(website.sourceId, site.sourceId);
  assert.notEqual(website.sourceId, website.websiteId);
  assert.equal(website.scope, 'property');
  assert.equal(website.propertyName, 'Beach House');
  assert.equal(website.currentGenerationId, site.current);
  assert.equal(website.totalPages, 3);
  assert.equal(website.enabledPages, 2);
  assert.equal(website.chunkCount, 3, 'chunks of enabled pages');
  assert.equal(website.selectedTokens, 300);
  assert.equal(website.activeTokens, 300);
  assert.deepEqual(website.selectionRules, [{ kind: 'path', key: '/blog', enabled: false }]);
  assert.deepEqual(website.pages.map((p: { sourceId: string }) => p.sourceId), site.pages, 'current generation only, in display order');
  for (const page of website.pages) {
    assertOnly(page, PAGE_FIELDS, 'website page');
    for (const field of ['sourceId', 'url', 'canonicalUrl', 'path', 'enabled', 'chunkCount']) assert.ok(field in page, `page lacks ${field}`);
  }

  assertOnly(asset, SOURCE_FIELDS, 'asset source');
  assert.equal(asset.sourceType, 'file');
  assertOnly(asset.asset, ASSET_FIELDS, 'asset');
  for (const field of ['sourceId', 'title', 'contentType', 'filename', 'sizeBytes', 'active', 'validationStatus', 'validationFindings']) assert.ok(field in asset.asset);
  assert.equal(asset.asset.validationStatus, 'pending');
  assert.deepEqual(Object.keys(asset.originalFile).sort(), ['contentType', 'filename', 'size', 'uploadedAt']);

  assertOnly(text, SOURCE_FIELDS, 'text source');
  for (const field of ['sourceId', 'sourceType', 'active', 'chunkCount']) assert.ok(field in text);
  assert.equal(text.scope, 'property');
  assert.equal(text.propertyId, propertyId);
  assert.deepEqual(text.createdBy, { id: 'admin', displayName: 'Admin API' });
  assert.equal(typeof text.createdAt, 'string');
  assert.equal(typeof text.updatedAt, 'string');

  const onlyWebsites = (await listItems(app, key, { sourceType: 'website', status: 'active' })).json().items;
  assert.deepEqual(onlyWebsites.map((i: { sourceId: string }) => i.sourceId), [site.sourceId]);
});

test('filters: status, sourceType, query over title and URL, propertyFilter', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  const beach = await addProperty(app, tenantId, 'Beach');
  const city = await addProperty(app, tenantId, 'City');
  const ids: Record<string, string> = {};
  ids.active = (await textSource(app, tenantId, { title: 'Pool hours', text: 'zebra crossing' })).sourceId;
  ids.inactive = (await textSource(app, tenantId, { title: 'Old pool hours', text: 'x', active: false })).sourceId;
  ids.beach = (await textSource(app, tenantId, { title: '100% organic_breakfast', text: 'x', propertyId: beach })).sourceId;
  ids.city = (await textSource(app, tenantId, { title: 'Parking', text: 'x', scope: 'property', propertyId: city })).sourceId;
  ids.url = (await app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, { sourceType: 'url', title: 'Menu', url: 'https://food.example/Menu-2024' })).sourceId;
  ids.website = (await seedWebsite(tenantId, { title: 'Main site', active: false })).sourceId;

  const list = async (query: Record<string, string>) => {
    const res = await listItems(app, key, query);
    assert.equal(res.statusCode, 200, res.body);
    return (res.json().items as Array<{ sourceId: string }>).map((i) => i.sourceId).sort();
  };
  const sorted = (...names: string[]) => names.map((n) => ids[n]).sort();
  assert.deepEqual(await list({}), sorted('active', 'inactive', 'beach', 'city', 'url', 'website'));
  assert.deepEqual(await list({ status: 'all' }), await list({}));
  assert.deepEqual(await list({ status: 'active' }), sorted('active', 'beach', 'city', 'url'));
  assert.deepEqual(await list({ status: 'inactive' }), sorted('inactive', 'website'));
  assert.deepEqual(await list({ sourceType: 'text' }), sorted('active', 'inactive', 'beach', 'city'));
  assert.deepEqual(await list({ sourceType: 'url' }), sorted('url'));
  assert.deepEqual(await list({ sourceType: 'website' }), sorted('website'));
  assert.deepEqual(await list({ sourceType: 'file' }), []);
  assert.deepEqual(await list({ query: 'POOL' }), sorted('active', 'inactive'), 'case-insensitive title search');
  assert.deepEqual(await list({ query: 'menu-2024' }), sorted('url'), 'URL metadata is searched');
  assert.deepEqual(await list({ query: 'hotel-sol.example' }), sorted('website'), 'a website matches on its root URL');
  assert.deepEqual(await list({ query: '100%' }), sorted('beach'), '% is literal');
  assert.deepEqual(await list({ query: 'c_b' }), sorted('beach'), '_ is literal');
  assert.deepEqual(await list({ query: '%' }), sorted('beach'));
  assert.deepEqual(await list({ query: 'zebra' }), [], 'the text itself is not searched');
  assert.deepEqual(await list({ propertyFilter: beach }), sorted('beach'));
  assert.deepEqual(await list({ propertyFilter: 'global' }), sorted('active', 'inactive', 'url', 'website'));
  assert.deepEqual(await list({ propertyFilter: 'global', status: 'active', sourceType: 'text', query: 'pool' }), sorted('active'));

  const other = await app.tenantWithKey(READ);
  const foreign = await addProperty(app, other.tenantId);
  for (const propertyFilter of [foreign, 'prop_nope']) {
    const res = await listItems(app, key, { propertyFilter });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error.code, 'M2M_NOT_FOUND');
  }
  assert.deepEqual((await listItems(app, other.key)).json().items, [], 'another tenant sees none of them');
});

test('paging: limit bounds, keyset cursor, stable while items are added', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  // Rows with identical creation times (to the microsecond) must still page exactly once each.
  await app.runtime.services.db.query(
    `INSERT INTO knowledge_sources (id, tenant_id, kind, title, text, created_at, updated_at)
     SELECT 'ks_seed_' || lpad(i::text, 3, '0'), $1, 'text', 'Seed ' || i, 'x', '2024-05-01T10:00:00.123456Z'::timestamptz + (i / 10) * interval '1 microsecond', now()
     FROM generate_series(1, 57) AS i`,
    [tenantId],
  );
  const all = (await listItems(app, key, { limit: 200 })).json();
  assert.equal(all.items.length, 57);
  assert.equal(all.nextCursor, undefined);
  assert.equal((await listItems(app, key)).json().items.length, 50, 'default limit 50');

  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const res = await listItems(app, key, { limit: 8, ...(cursor ? { cursor } : {}) });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.ok(body.items.length <= 8);
    seen.push(...body.items.map((i: { sourceId: string }) => i.sourceId));
    cursor = body.nextCursor;
    assert.ok(cursor === undefined || cursor.length <= 400);
    if (pages === 1) for (let i = 0; i < 3; i += 1) await textSource(app, tenantId, { title: `Added while paging ${i}`, text: 'x' });
    pages += 1;
  } while (cursor);
  assert.equal(pages, 8);
  assert.deepEqual(seen, all.items.map((i: { sourceId: string }) => i.sourceId), 'every item once, in order; items added meanwhile sort before the cursor');

  for (const limit of ['0', '201', 'abc']) assert.equal((await listItems(app, key, { limit })).statusCode, 400);
  assert.equal((await listItems(app, key, { limit: 200 })).json().items.length, 60);
});

test('cursors are bound to their filters and tenant; forged ones are 400 M2M_INVALID_CURSOR', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  for (let i = 0; i < 3; i += 1) await textSource(app, tenantId, { title: `Doc ${i}`, text: 'x' });
  const first = (await listItems(app, key, { limit: 1, status: 'active' })).json();
  assert.ok(first.nextCursor);
  assert.equal((await listItems(app, key, { limit: 1, status: 'active', cursor: first.nextCursor })).statusCode, 200);
  assert.equal((await listItems(app, key, { limit: 5, status: 'active', cursor: first.nextCursor })).statusCode, 200, 'the limit may change');

  const other = await app.tenantWithKey(READ);
  const cases: Array<[string, Record<string, string | number>, string]> = [
    ['another filter', { status: 'all', cursor: first.nextCursor }, 'M2M_INVALID_CURSOR'],
    ['an added filter', { status: 'active', query: 'Doc', cursor: first.nextCursor }, 'M2M_INVALID_CURSOR'],
    ['a forged signature', { status: 'active', cursor: `${first.nextCursor.split('.')[0]}.AAAAAAAAAAAAAAAAAAAAAAAAAAA` }, 'M2M_INVALID_CURSOR'],
    ['garbage', { status: 'active', cursor: 'not-a-cursor' }, 'M2M_INVALID_CURSOR'],
    ['too long', { status: 'active', cursor: 'x'.repeat(401) }, 'M2M_INVALID_REQUEST'],
  ];
  for (const [what, query, code] of cases) {
    const res = await listItems(app, key, query);
    assert.equal(res.statusCode, 400, what);
    assert.equal(res.json().error.code, code, what);
  }
  const foreign = await listItems(app, other.key, { limit: 1, status: 'active', cursor: first.nextCursor });
  assert.equal(foreign.json().error.code, 'M2M_INVALID_CURSOR', 'a cursor of another tenant');
});

test('bad query input and missing scope', async () => {
  const { key } = await app.tenantWithKey(READ);
  const cases: Array<Record<string, string>> = [
    { sourceType: 'pdf' },
    { sourceType: 'page' },
    { status: 'deleted' },
    { query: 'q'.repeat(201) },
    { query: '' },
    { propertyFilter: 'p'.repeat(129) },
    { owner: 'me' },
  ];
  for (const query of cases) {
    const res = await listItems(app, key, query);
    assert.equal(res.statusCode, 400, JSON.stringify(query));
    assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST');
  }
  assert.equal((await listItems(app, key, { query: 'q'.repeat(200), propertyFilter: 'global' })).statusCode, 200);
  const writer = await app.tenantWithKey(['knowledge:write']);
  assert.equal((await listItems(app, writer.key)).statusCode, 200, 'knowledge:write implies knowledge:read');
  const none = await app.tenantWithKey(['webhooks:read']);
  const refused = await listItems(app, none.key);
  assert.equal(refused.statusCode, 403);
  assert.deepEqual(refused.json().error.details, { requiredScopes: ['knowledge:read'], missingScopes: ['knowledge:read'] });
});

test('the OpenAPI document lists the knowledge routes, extensions marked', async () => {
  const doc = (await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1/openapi.json' })).json();
  assert.ok(doc.paths['/knowledge/items'].get);
  assert.ok(doc.paths['/knowledge/asset-folders/{folderId}'].patch);
  assert.ok(doc.paths['/knowledge/sources/{sourceId}/folder'].patch);
  assert.equal(doc.paths['/knowledge/sources'].post['x-extension'], true);
  assert.equal(doc.paths['/knowledge/asset-folders'].post['x-extension'], true);
  assert.equal(doc.paths['/knowledge/items'].get['x-extension'], undefined);
  assert.equal(Object.keys(doc.paths).some((p) => p.startsWith('/share')), false);
});
