import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { startDueRecrawls } from '../../src/knowledge/crawler/recrawl.js';
import { nextCrawlAt, spreadOffsetMs } from '../../src/knowledge/crawler/schedule.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { html, page, prose, startSite, type FixtureSite, type Routes } from '../fixtures/site/server.js';
import { finished, websiteItem, type JobBody } from '../fixtures/site/helpers.js';

const HOUR = 3_600_000;
let app: TestApp;
const clock = new ManualClock('2026-03-02T08:00:00Z');
const sites: FixtureSite[] = [];
let tenant: { tenantId: string; key: string };

before(async () => {
  app = await startTestApp({
    clock,
    env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', CRAWL_FETCH_TIMEOUT_MS: '2000', CRAWL_RECRAWL_CHECK_MS: '100', CRAWL_RECRAWL_BATCH: '10' },
    startWorkers: true,
  });
  tenant = await app.tenantWithKey(['knowledge:write']);
});
after(async () => {
  await app.close();
  await Promise.all(sites.map((s) => s.close()));
});

async function linkedSite(n: number) {
  const links = Array.from({ length: n }, (_, i) => `/p${i}`);
  const routes: Routes = { '/': html(page('Home', prose('Home'), links)) };
  links.forEach((path, i) => (routes[path] = html(page(`Page ${i}`, prose(`Topic number ${i}`)))));
  const site = await startSite(routes);
  sites.push(site);
  return site;
}

async function jobsOf(websiteId: string): Promise<JobBody[]> {
  const jobs = (await app.api(tenant.key, 'GET', '/knowledge/url/crawl?status=all&limit=100')).json().jobs as JobBody[];
  return jobs.filter((j) => j.websiteId === websiteId);
}

/** Waits until the recrawl pass has run at the clock's current time (it then reschedules itself after it). */
async function recrawlPassRan(): Promise<void> {
  await eventually(async () => {
    const rows = await app.runtime.services.db.query<{ run_at: Date }>(`SELECT run_at FROM jobs WHERE task = 'knowledge.recrawl' AND state = 'queued'`);
    return rows.length === 1 && rows[0].run_at.getTime() > clock.now().getTime();
  }, 10_000, 'the recrawl pass');
}

test('spread: websites due at the same moment get offsets across the window; failures back off', () => {
  const offsets = Array.from({ length: 1000 }, (_, i) => spreadOffsetMs(`web_${i}`, 24));
  assert.ok(offsets.every((o) => o >= 0 && o < HOUR));
  const minutes = new Set(offsets.map((o) => Math.floor(o / 60_000)));
  assert.ok(minutes.size >= 55, `offsets fall in ${minutes.size} distinct minutes of the hour`);
  assert.ok(spreadOffsetMs('web_x', 1) < 0.1 * HOUR, 'at most a tenth of a short interval');
  const from = new Date('2026-01-01T00:00:00Z');
  const plain = nextCrawlAt(from, 'web_x', 6).getTime() - from.getTime();
  const backedOff = nextCrawlAt(from, 'web_x', 6, 2).getTime() - from.getTime();
  assert.equal(backedOff - plain, 18 * HOUR, 'two failures in a row: four intervals');
  assert.ok(nextCrawlAt(from, 'web_x', 24, 30).getTime() - from.getTime() <= 721 * HOUR, 'capped at 30 days');
});

test('PATCH /knowledge/websites/{websiteId}: title, rules applied to the current pages at once, recrawl interval', async () => {
  const site = await linkedSite(3);
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 10 });
  assert.equal(res.statusCode, 202, res.body);
  const { job } = await finished(app, tenant.key, res.json().job.jobId);
  assert.equal(job.status, 'completed');
  const before = await websiteItem(app, tenant.key, job.websiteId);
  site.requests.length = 0;

  const patched = await app.api(tenant.key, 'PATCH', `/knowledge/websites/${job.websiteId}`, {
    title: 'Hotel Sol site',
    selectionRules: [{ kind: 'page', key: '/p1', enabled: false }],
    recrawlIntervalHours: 12,
  });
  assert.equal(patched.statusCode, 200, patched.body);
  const body = patched.json();
  assert.deepEqual(Object.keys(body).sort(), ['nextCrawlAt', 'recrawlIntervalHours', 'website']);
  assert.equal(body.recrawlIntervalHours, 12);
  const next = new Date(body.nextCrawlAt).getTime() - new Date(String(before.lastCrawledAt)).getTime();
  assert.ok(next >= 12 * HOUR && next < 13 * HOUR, `next crawl ${next / HOUR} h after the last`);
  assert.equal(body.website.title, 'Hotel Sol site');
  const p1 = body.website.pages.find((p: { path: string }) => p.path === '/p1');
  assert.equal(p1.enabled, false, 'the rule applies to the current generation without a crawl');
  assert.equal(body.website.enabledPages, Number(before.enabledPages) - 1);
  assert.equal(body.website.chunkCount, Number(before.chunkCount) - p1.chunkCount);
  assert.equal(site.requests.length, 0, 'nothing was fetched');
  assert.equal((await jobsOf(job.websiteId)).length, 1, 'no crawl was started');
  const item = await websiteItem(app, tenant.key, job.websiteId);
  assert.equal(item.enabledPages, body.website.enabledPages);
  assert.equal('recrawlIntervalHours' in item, false, 'the inventory item keeps exactly the spec fields');

  const cleared = await app.api(tenant.key, 'PATCH', `/knowledge/websites/${job.websiteId}`, { recrawlIntervalHours: null, defaultEnabled: true, selectionRules: [] });
  assert.equal(cleared.statusCode, 200, cleared.body);
  assert.equal(cleared.json().recrawlIntervalHours, null);
  assert.equal(cleared.json().nextCrawlAt, undefined);
  assert.equal(cleared.json().website.enabledPages, before.enabledPages);

  for (const bad of [{}, { recrawlIntervalHours: 0 }, { recrawlIntervalHours: 721 }, { recrawlIntervalHours: '5' }, { maxPages: 3 }, { title: '' },
    { selectionRules: [{ kind: 'path', key: 'blog', enabled: false }] }]) {
    const r = await app.api(tenant.key, 'PATCH', `/knowledge/websites/${job.websiteId}`, bad);
    assert.equal(r.statusCode, 400, `${JSON.stringify(bad)} → ${r.body}`);
    assert.equal(r.json().error.code, 'M2M_INVALID_REQUEST');
  }
  const other = await app.tenantWithKey(['knowledge:write']);
  assert.equal((await app.api(other.key, 'PATCH', `/knowledge/websites/${job.websiteId}`, { title: 'x' })).statusCode, 404);
  const reader = await app.tenantWithKey(['knowledge:read']);
  assert.equal((await app.api(reader.key, 'PATCH', `/knowledge/websites/${job.websiteId}`, { title: 'x' })).statusCode, 403);
  const withId = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { websiteId: job.websiteId, recrawlIntervalHours: 3 });
  assert.equal(withId.statusCode, 400, 'the interval belongs to the website: PATCH it');
});

test('due websites are recrawled by the workers; a failing website backs off', async () => {
  const site = await linkedSite(2);
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 10, recrawlIntervalHours: 2 });
  assert.equal(res.statusCode, 202, res.body);
  const first = await finished(app, tenant.key, res.json().job.jobId);
  assert.equal(first.job.status, 'completed');
  const websiteId = first.job.websiteId;

  clock.advance(HOUR);
  await recrawlPassRan();
  assert.equal((await jobsOf(websiteId)).length, 1, 'not due after one hour of two');

  clock.advance(1.5 * HOUR);
  await recrawlPassRan();
  const second = await eventually(async () => (await jobsOf(websiteId)).find((j) => j.jobId !== first.job.jobId), 10_000, 'a scheduled crawl');
  assert.equal((await finished(app, tenant.key, second.jobId)).job.status, 'completed');

  // The site goes away: the scheduled crawl fails, and the next one waits two intervals instead of one.
  site.routes['/robots.txt'] = { status: 503, body: 'down' };
  clock.advance(2.5 * HOUR);
  await recrawlPassRan();
  const third = await eventually(async () => (await jobsOf(websiteId)).find((j) => j.jobId !== first.job.jobId && j.jobId !== second.jobId), 10_000, 'a third crawl');
  assert.equal((await finished(app, tenant.key, third.jobId)).job.status, 'failed');
  clock.advance(2.5 * HOUR);
  await recrawlPassRan();
  assert.equal((await jobsOf(websiteId)).length, 3, 'backed off: not due one interval after a failure');
  clock.advance(2 * HOUR);
  await recrawlPassRan();
  await eventually(async () => (await jobsOf(websiteId)).length === 4, 10_000, 'the crawl after the back-off');
});

test('two recrawl passes at once never start the same website twice; a pass starts at most its batch', async () => {
  const db = app.runtime.services.db;
  const ids: string[] = [];
  for (let i = 0; i < 5; i += 1) {
    const site = await linkedSite(1);
    const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 2, recrawlIntervalHours: 1 });
    const done = await finished(app, tenant.key, res.json().job.jobId);
    ids.push(done.job.websiteId);
  }
  await app.runtime.runner.stop(1000);
  try {
    const due = new Date(clock.now().getTime() + 3 * HOUR);
    const batch = await startDueRecrawls(db, due, 2);
    assert.equal(batch.length, 2, 'one pass starts at most its batch');
    const [a, b] = await Promise.all([startDueRecrawls(db, due, 100), startDueRecrawls(db, due, 100)]);
    const started = await db.query<{ website_id: string }>(
      `SELECT website_id FROM knowledge_crawl_jobs WHERE id = ANY($1::text[])`, [[...batch, ...a, ...b]]);
    const websites = started.map((r) => r.website_id);
    assert.equal(new Set(websites).size, websites.length, 'no website started twice');
    assert.ok(ids.every((id) => websites.includes(id)), 'every due website started by one pass or the other');
  } finally {
    await app.runtime.runner.start();
  }
});
