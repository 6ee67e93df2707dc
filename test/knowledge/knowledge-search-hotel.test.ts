import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import type { FixtureSite } from '../fixtures/site/server.js';
import { finished, websiteItem } from '../fixtures/site/helpers.js';
import { HOTEL_PAGES, hotelQuestions, startHotelSite } from '../fixtures/hotel-site/site.js';

// The fixture hotel website (English and Spanish) crawled by the real crawler, then searched as a guest would:
// each answer cites the crawled page (websiteId, URL); only the current generation of an active website and its
// enabled pages are found.

let app: TestApp;
let site: FixtureSite;
let tenant: { tenantId: string; key: string };
let websiteId: string;

interface Result {
  sourceId: string;
  websiteId?: string;
  title: string;
  url?: string;
  text: string;
  score: number;
}

async function search(query: string, limit = 5): Promise<Result[]> {
  const res = await app.api(tenant.key, 'POST', '/knowledge/search', { query, limit });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { results: Result[] }).results;
}

const pathOf = (result: Result) => (result.url ? new URL(result.url).pathname : '');

before(async () => {
  site = await startHotelSite();
  app = await startTestApp({ env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' }, startWorkers: true });
  tenant = await app.tenantWithKey(['knowledge:read', 'knowledge:write']);
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { rootUrl: `${site.origin}/en/`, crawlDepth: 3, maxPages: 100 });
  assert.equal(res.statusCode, 202, res.body);
  const { job } = await finished(app, tenant.key, res.json().job.jobId, 60_000);
  assert.equal(job.status, 'completed', JSON.stringify(job));
  assert.equal(job.snapshotPages, HOTEL_PAGES.length, 'every page of the site, English and Spanish');
  websiteId = job.websiteId;
});
after(async () => {
  await app.close();
  await site.close();
});

test('guest questions in English and Spanish find the page that answers them in the top 5', async () => {
  const questions = hotelQuestions();
  assert.ok(questions.length >= 50);
  const sample = ['Can I bring my dog?', 'Is there somewhere to park the car?', "what's the wifi password", '¿Puedo ir con mi perro?', '¿Cuál es la clave del wifi?', 'how much is a massage'];
  for (const question of sample) {
    const expected = questions.find((q) => q.question === question)?.page;
    assert.ok(expected, question);
    const results = await search(question);
    assert.ok(results.map(pathOf).includes(expected), `${question}: ${results.map(pathOf).join(', ')}`);
    const hit = results.find((r) => pathOf(r) === expected);
    assert.equal(hit?.websiteId, websiteId, 'a crawled page cites its website');
    assert.ok(hit?.title && hit.text.length > 0 && hit.url?.startsWith(site.origin));
  }
});

test('only the current generation, enabled pages and an active website are searched', async () => {
  const before = await search('Can I bring my dog?', 20);
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { websiteId });
  assert.equal(res.statusCode, 202, res.body);
  const { job } = await finished(app, tenant.key, res.json().job.jobId, 60_000);
  assert.equal(job.status, 'completed', JSON.stringify(job));
  const item = await websiteItem(app, tenant.key, websiteId);
  const current = new Set(item.pages.map((p) => p.sourceId));
  const after = await search('Can I bring my dog?', 20);
  assert.equal(after.length, before.length, 'the same pages, once each');
  for (const result of after) assert.ok(current.has(result.sourceId), `${result.sourceId} is a page of the current generation`);

  const patched = await app.api(tenant.key, 'PATCH', `/knowledge/websites/${websiteId}`, { selectionRules: [{ kind: 'page', key: '/en/pets', enabled: false }] });
  assert.equal(patched.statusCode, 200, patched.body);
  assert.ok(!(await search('Can I bring my dog?', 20)).some((r) => pathOf(r) === '/en/pets'), 'a page disabled by the selection rules is left out');
  await app.api(tenant.key, 'PATCH', `/knowledge/websites/${websiteId}`, { selectionRules: [] });
  assert.ok((await search('Can I bring my dog?', 20)).some((r) => pathOf(r) === '/en/pets'), 'enabled again');

  await app.runtime.services.db.query('UPDATE knowledge_sources SET active = false WHERE id = $1', [item.sourceId]);
  assert.deepEqual(await search('Can I bring my dog?'), [], 'an inactive website is not searched');
  await app.runtime.services.db.query('UPDATE knowledge_sources SET active = true WHERE id = $1', [item.sourceId]);
  assert.ok((await search('Can I bring my dog?')).length > 0);
  assert.deepEqual(
    (await app.api(tenant.key, 'POST', '/knowledge/search', { query: 'dog', sourceTypes: ['text'] })).json(),
    { results: [] },
    'sourceTypes text leaves crawled pages out',
  );
});
