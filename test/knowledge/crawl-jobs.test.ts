import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { html, page, prose, startSite, type FixtureSite } from '../fixtures/site/server.js';
import { addWebsite, finished, websiteItem, type JobBody } from '../fixtures/site/helpers.js';

let app: TestApp;
const sites: FixtureSite[] = [];
let tenant: { tenantId: string; key: string };

before(async () => {
  app = await startTestApp({
    env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', CRAWL_FETCH_TIMEOUT_MS: '1000', CRAWL_CONCURRENCY_PER_HOST: '4' },
    startWorkers: true,
  });
  tenant = await app.tenantWithKey(['knowledge:write']);
});
after(async () => {
  await app.close();
  await Promise.all(sites.map((s) => s.close()));
});

/** A small site: root linking to n pages. */
async function smallSite(n: number, robots?: { status?: number; body?: string }) {
  const links = Array.from({ length: n }, (_, i) => `/p${i}`);
  const routes: Record<string, ReturnType<typeof html> | { status?: number; body?: string; headers?: Record<string, string> }> = {
    '/': html(page('Home', prose('Home'), links)),
  };
  links.forEach((path, i) => (routes[path] = html(page(`Page ${i}`, prose(`Topic number ${i}`)))));
  if (robots) routes['/robots.txt'] = robots;
  const site = await startSite(routes);
  sites.push(site);
  return site;
}

async function crawl(body: Record<string, unknown>, key = tenant.key) {
  const res = await app.api(key, 'POST', '/knowledge/url/crawl', body);
  assert.equal(res.statusCode, 202, res.body);
  return finished(app, key, (res.json().job as JobBody).jobId);
}

test('maxPages caps the snapshot', async () => {
  const site = await smallSite(10);
  const { job } = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 3 });
  assert.equal(job.status, 'completed');
  assert.equal(job.snapshotPages, 3);
  const item = await websiteItem(app, tenant.key, job.websiteId);
  assert.deepEqual(item.pages.map((p) => p.path), ['/', '/p0', '/p1'], 'breadth-first, in link order');
});

test('robots.txt answering 5xx: nothing is crawled, the crawl fails and the current generation stays', async () => {
  const site = await smallSite(2);
  const { job: first } = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 10 });
  assert.equal(first.status, 'completed', 'no robots.txt (404): everything allowed');
  assert.equal(first.snapshotPages, 3);

  site.routes['/robots.txt'] = { status: 503, body: 'down' };
  site.requests.length = 0;
  const { job } = await crawl({ websiteId: first.websiteId });
  assert.equal(job.status, 'failed');
  assert.equal(job.error?.code, 'robots_unavailable');
  assert.deepEqual(site.paths(), ['/robots.txt'], 'only robots.txt was requested');
  const item = await websiteItem(app, tenant.key, first.websiteId);
  assert.equal(item.status, 'failed');
  assert.equal(item.currentGenerationId, first.websiteGenerationId, 'the current generation is untouched');
  assert.equal(item.totalPages, 3);
  const staging = await app.runtime.services.db.query('SELECT id FROM knowledge_website_generations WHERE id = $1', [job.websiteGenerationId]);
  assert.equal(staging.length, 0, "the failed crawl's staging generation is discarded");
});

test('robots.txt disallowing the whole site for our agent fails with no_pages; Crawl-delay spaces requests', async () => {
  const blocked = await smallSite(2, { body: 'User-agent: m2m-knowledge-crawler\nDisallow: /\n\nUser-agent: *\nAllow: /\n' });
  const { job } = await crawl({ rootUrl: `${blocked.origin}/`, crawlDepth: 1, maxPages: 10 });
  assert.equal(job.status, 'failed');
  assert.equal(job.error?.code, 'no_pages');
  assert.deepEqual(blocked.paths().filter((p) => p !== '/robots.txt' && p !== '/sitemap.xml'), []);

  const slow = await smallSite(3, { body: 'User-agent: *\nCrawl-delay: 0.25\n' });
  const times: number[] = [];
  for (const path of ['/', '/p0', '/p1', '/p2']) {
    const route = slow.routes[path];
    slow.routes[path] = () => {
      times.push(Date.now());
      return route as never;
    };
  }
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { rootUrl: `${slow.origin}/`, crawlDepth: 1, maxPages: 10 });
  const jobId = res.json().job.jobId;
  const running = await eventually(async () => {
    const j = (await app.api(tenant.key, 'GET', `/knowledge/url/crawl/${jobId}`)).json().job as JobBody;
    return j.status === 'running' && j.progress.phase === 'crawling' && j.progress.pagesProcessed > 0 ? j : undefined;
  }, 10_000, 'a running crawl with progress');
  assert.ok(running.startedAt);
  const active = (await app.api(tenant.key, 'GET', '/knowledge/url/crawl?status=active')).json().jobs as JobBody[];
  assert.ok(active.some((j) => j.jobId === jobId));
  const done = await finished(app, tenant.key, jobId);
  assert.equal(done.job.status, 'completed');
  assert.equal(times.length, 4);
  // The gate spaces the starts of requests 250 ms apart; the site sees each one a little later, by a delay that
  // varies with the machine's load. That delay cancels out over the whole run, not in any one gap, so each gap
  // is held to "spaced, not concurrent" and the run to three full delays (less one arrival's delay).
  for (let i = 1; i < times.length; i += 1) assert.ok(times[i] - times[i - 1] >= 150, `requests ${times[i] - times[i - 1]} ms apart`);
  assert.ok(times[3] - times[0] >= 650, `four requests within ${times[3] - times[0]} ms`);
});

test('redirects off the site, non-HTML answers and redirect loops are failed pages', async () => {
  const site = await smallSite(0);
  const offsite = site.origin.replace('127.0.0.1', 'localhost');
  site.routes['/'] = html(page('Home', prose('Home'), ['/away', '/file.pdf', '/loop', '/ok']));
  site.routes['/away'] = { status: 302, headers: { location: `${offsite}/ok` } };
  site.routes['/file.pdf'] = { headers: { 'content-type': 'application/pdf' }, body: '%PDF-1.4' };
  site.routes['/loop'] = { status: 302, headers: { location: '/loop?x=1' } };
  site.routes['/loop?x=1'] = { status: 302, headers: { location: '/loop?x=2' } };
  site.routes['/loop?x=2'] = { status: 302, headers: { location: '/loop?x=3' } };
  site.routes['/loop?x=3'] = { status: 302, headers: { location: '/loop?x=4' } };
  site.routes['/loop?x=4'] = { status: 302, headers: { location: '/loop?x=5' } };
  site.routes['/loop?x=5'] = { status: 302, headers: { location: '/loop?x=6' } };
  site.routes['/ok'] = html(page('OK', prose('Fine')));
  const { job, failedPages } = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 10 });
  assert.equal(job.status, 'completed');
  assert.equal(job.snapshotPages, 2);
  const codes = Object.fromEntries(failedPages.map((f) => [new URL(f.url).pathname, f.code]));
  // /about is the navigation link every fixture page carries (404 here).
  assert.deepEqual(codes, { '/away': 'offsite_redirect', '/loop': 'redirect', '/file.pdf': 'unsupported_content_type', '/about': 'http_status' });
  assert.equal(site.requests.some((r) => r.startsWith('localhost')), false);
});

test('tenant isolation', async () => {
  const site = await smallSite(1);
  const { job } = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 5 });
  const other = await app.tenantWithKey(['knowledge:write']);
  assert.equal((await app.api(other.key, 'GET', `/knowledge/url/crawl/${job.jobId}`)).statusCode, 404);
  assert.deepEqual((await app.api(other.key, 'GET', '/knowledge/url/crawl?status=all')).json().jobs, []);
  const start = await app.api(other.key, 'POST', '/knowledge/url/crawl', { websiteId: job.websiteId });
  assert.equal(start.statusCode, 404);
  assert.equal(start.json().error.code, 'M2M_NOT_FOUND');
});

test('bad input: 400, 403, 404', async () => {
  const { key, tenantId } = tenant;
  const bodies: Array<Record<string, unknown>> = [
    {},
    { rootUrl: 'https://a.example/', crawlDepth: 2 },
    { rootUrl: 'ftp://a.example/', crawlDepth: 2, maxPages: 5 },
    { rootUrl: 'not a url', crawlDepth: 2, maxPages: 5 },
    { rootUrl: `https://a.example/${'x'.repeat(2048)}`, crawlDepth: 2, maxPages: 5 },
    { rootUrl: 'https://user:pw@a.example/', crawlDepth: 2, maxPages: 5 },
    { rootUrl: 'https://a.example/', crawlDepth: 0, maxPages: 5 },
    { rootUrl: 'https://a.example/', crawlDepth: 11, maxPages: 5 },
    { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 501 },
    { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: '5' },
    { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 5, extra: true },
    { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 5, scope: 'property' },
    { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 5, selectionRules: [{ kind: 'path', key: 'blog', enabled: false }] },
    { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 5, selectionRules: [{ kind: 'page', key: 'https://b.example/x', enabled: false }] },
    { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 5, selectionRules: [{ kind: 'folder', key: '/x', enabled: false }] },
    { websiteId: 'web_x', rootUrl: 'https://a.example/' },
  ];
  for (const body of bodies) {
    const res = await app.api(key, 'POST', '/knowledge/url/crawl', body);
    assert.equal(res.statusCode, 400, `${JSON.stringify(body).slice(0, 120)} → ${res.body}`);
    assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST');
  }
  for (const query of ['limit=0', 'limit=101', 'limit=x', 'status=completed', 'cursor=abc']) {
    const res = await app.api(key, 'GET', `/knowledge/url/crawl?${query}`);
    assert.equal(res.statusCode, 400, query);
  }
  assert.equal((await app.api(key, 'GET', '/knowledge/url/crawl?limit=100&status=all')).statusCode, 200);
  assert.equal((await app.api(key, 'GET', '/knowledge/url/crawl/crawl_nope')).statusCode, 404);
  assert.equal((await app.api(key, 'POST', '/knowledge/url/crawl', { websiteId: 'web_nope' })).statusCode, 404);
  assert.equal((await app.api(key, 'POST', '/knowledge/url/crawl', { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 5, propertyId: 'prop_nope' })).statusCode, 404);

  const reader = await app.tenantWithKey(['knowledge:read']);
  const refused = await app.api(reader.key, 'POST', '/knowledge/url/crawl', { websiteId: 'web_x' });
  assert.equal(refused.statusCode, 403);
  assert.deepEqual(refused.json().error.details, { requiredScopes: ['knowledge:write'], missingScopes: ['knowledge:write'] });
  assert.equal((await app.api(reader.key, 'GET', '/knowledge/url/crawl')).statusCode, 200);
  const none = await app.tenantWithKey(['webhooks:read']);
  assert.equal((await app.api(none.key, 'GET', '/knowledge/url/crawl')).statusCode, 403);

  assert.equal((await app.adminRaw('POST', '/tenants/ten_nope/knowledge/websites', { rootUrl: 'https://a.example/', crawlDepth: 1, maxPages: 5 })).statusCode, 404);
  assert.equal((await app.adminRaw('POST', `/tenants/${tenantId}/knowledge/websites`, { rootUrl: 'https://a.example/', crawlDepth: 1 })).statusCode, 400);

  const doc = (await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1/openapi.json' })).json();
  assert.equal(doc.paths['/knowledge/url/crawl'].get['x-extension'], undefined);
  assert.equal(doc.paths['/knowledge/url/crawl'].post['x-extension'], true);
  assert.equal(doc.paths['/knowledge/url/crawl/{jobId}'].get['x-extension'], true);
});

test('a crawl re-claimed after a crash restarts its staging generation; too many runs fail it clearly', async () => {
  const db = app.runtime.services.db;
  const site = await smallSite(2);
  const website = await addWebsite(app, tenant.tenantId, { rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 5 });
  const first = await finished(app, tenant.key, website.latestJob.jobId);
  assert.equal(first.job.status, 'completed');

  // A worker died mid-crawl: the crawl is running with a half-written staging page, its lease expired.
  await app.runtime.runner.stop(0);
  const start = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { websiteId: website.websiteId });
  const jobId = start.json().job.jobId as string;
  const crawlRow = (await db.query<{ runner_job_id: number; generation_id: string }>('SELECT runner_job_id, generation_id FROM knowledge_crawl_jobs WHERE id = $1', [jobId]))[0];
  await db.query(`UPDATE jobs SET state = 'running', attempts = 1, locked_by = 'dead-worker', locked_until = now() - interval '1 second' WHERE id = $1`, [crawlRow.runner_job_id]);
  await db.query(`UPDATE knowledge_crawl_jobs SET status = 'running', phase = 'crawling', run_attempt = 1 WHERE id = $1`, [jobId]);
  await db.query(
    `INSERT INTO knowledge_sources (id, tenant_id, kind, url, website_id, website_generation_id, canonical_url, path, enabled, created_at, updated_at)
     VALUES ('ks_stale', $1, 'website_page', 'x', $2, $3, 'x', '/stale', true, now(), now())`,
    [tenant.tenantId, website.websiteId, crawlRow.generation_id],
  );
  assert.equal((await app.api(tenant.key, 'GET', `/knowledge/url/crawl/${jobId}`)).json().job.status, 'running');
  await app.runtime.runner.start();
  const restarted = await finished(app, tenant.key, jobId);
  assert.equal(restarted.job.status, 'completed');
  const item = await websiteItem(app, tenant.key, website.websiteId);
  assert.deepEqual(item.pages.map((p) => p.path).sort(), ['/', '/p0', '/p1'], 'the stale staging page is gone');

  // The third crash: the crawl is failed with crawl_interrupted instead of running again.
  await app.runtime.runner.stop(0);
  const again = (await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { websiteId: website.websiteId })).json().job.jobId as string;
  const runnerJob = (await db.query<{ runner_job_id: number }>('SELECT runner_job_id FROM knowledge_crawl_jobs WHERE id = $1', [again]))[0].runner_job_id;
  await db.query(`UPDATE jobs SET state = 'running', attempts = 3, locked_by = 'dead-worker', locked_until = now() - interval '1 second' WHERE id = $1`, [runnerJob]);
  await app.runtime.runner.start();
  const given = await finished(app, tenant.key, again);
  assert.equal(given.job.status, 'failed');
  assert.equal(given.job.error?.code, 'crawl_interrupted');
  assert.equal((await websiteItem(app, tenant.key, website.websiteId)).currentGenerationId, restarted.job.websiteGenerationId);

  // A crawl whose runner job is gone is failed on the next read instead of looking alive forever.
  await app.runtime.runner.stop(0);
  const orphan = (await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { websiteId: website.websiteId })).json().job.jobId as string;
  await db.query(`UPDATE jobs SET state = 'failed', finished_at = now() WHERE id = (SELECT runner_job_id FROM knowledge_crawl_jobs WHERE id = $1)`, [orphan]);
  const lost = (await app.api(tenant.key, 'GET', `/knowledge/url/crawl/${orphan}`)).json().job as JobBody;
  assert.equal(lost.status, 'failed');
  assert.equal(lost.error?.code, 'crawl_lost');
  assert.equal((await websiteItem(app, tenant.key, website.websiteId)).status, 'failed');
  await app.runtime.runner.start();
});
