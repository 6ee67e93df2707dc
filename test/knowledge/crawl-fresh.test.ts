import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import type { Resolver } from '../../src/net/guard.js';
import { html, page, prose, startSite, type FixtureSite, type Routes } from '../fixtures/site/server.js';
import { finished, websiteItem, type JobBody } from '../fixtures/site/helpers.js';

let app: TestApp;
const sites: FixtureSite[] = [];
let tenant: { tenantId: string; key: string };

/** hotel.test resolves to 127.0.0.1 until the site "vanishes" (its name stops resolving). */
let vanished = false;
const resolver: Resolver = async (hostname) => {
  if (hostname !== 'hotel.test') throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  if (vanished) throw Object.assign(new Error('getaddrinfo ENOTFOUND hotel.test'), { code: 'ENOTFOUND' });
  return [{ address: '127.0.0.1', family: 4 }];
};

before(async () => {
  app = await startTestApp({
    env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', CRAWL_FETCH_TIMEOUT_MS: '2000', CRAWL_CONCURRENCY_PER_HOST: '4', CRAWL_DEADLINE_MS: '30000' },
    startWorkers: true,
    resolver,
  });
  tenant = await app.tenantWithKey(['knowledge:write', 'webhooks:write']);
});
after(async () => {
  await app.close();
  await Promise.all(sites.map((s) => s.close()));
});

/** A site whose root links to `n` pages /p0 … /p(n-1); `extra` adds or replaces routes. */
async function linkedSite(n: number, extra: Routes = {}) {
  const links = Array.from({ length: n }, (_, i) => `/p${i}`);
  const routes: Routes = { '/': html(page('Home', prose('Home'), links)) };
  links.forEach((path, i) => (routes[path] = html(page(`Page ${i}`, prose(`Topic number ${i}`)))));
  Object.assign(routes, extra);
  const site = await startSite(routes);
  sites.push(site);
  return site;
}

async function crawl(body: Record<string, unknown>) {
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', body);
  assert.equal(res.statusCode, 202, res.body);
  return finished(app, tenant.key, (res.json().job as JobBody).jobId);
}

/** Requests for pages (robots.txt and sitemaps aside). */
const pageRequests = (site: FixtureSite) => site.paths().filter((p) => p !== '/robots.txt' && p !== '/sitemap.xml');

test('never over-fetch: maxPages 5 on a 30-page site requests 5 pages plus the ones that could not be stored', async () => {
  const site = await linkedSite(30, { '/p1': { status: 404, body: 'gone' }, '/p3': { status: 500, body: 'boom' } });
  const { job, failedPages } = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 2, maxPages: 5 });
  assert.equal(job.status, 'completed', JSON.stringify(job));
  assert.equal(job.snapshotPages, 5);
  const requested = pageRequests(site);
  assert.ok(failedPages.length >= 2, JSON.stringify(failedPages));
  assert.equal(requested.length, 5 + failedPages.length, `requested ${requested.join(' ')}; failed ${failedPages.map((f) => f.url).join(' ')}`);
  assert.equal(new Set(requested).size, requested.length, 'no page requested twice');

  // Disabled pages do not count against maxPages, and are requested only as stored (disabled) pages.
  site.requests.length = 0;
  const { job: second } = await crawl({ websiteId: job.websiteId, selectionRules: [{ kind: 'page', key: '/p0', enabled: false }] });
  assert.equal(second.status, 'completed', JSON.stringify(second));
  const item = await websiteItem(app, tenant.key, job.websiteId);
  assert.equal(item.enabledPages, 5);
  assert.equal(item.totalPages, 6, 'the disabled /p0 is kept beside five enabled pages');
  const failed = (await app.api(tenant.key, 'GET', `/knowledge/url/crawl/${second.jobId}`)).json().failedPages as unknown[];
  assert.equal(pageRequests(site).length, 6 + failed.length);
});

test('changes: a completed crawl counts new, changed, same and removed pages and lists the changed ones', async () => {
  const site = await linkedSite(4);
  const first = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 20 });
  assert.equal(first.job.status, 'completed', JSON.stringify(first.job));
  assert.deepEqual(first.job.changes, { new: 5, changed: 0, same: 0, removed: 0 }, 'a first crawl: every page is new');
  assert.deepEqual(first.changedPages.map((p) => p.changeStatus), ['new', 'new', 'new', 'new', 'new']);

  site.routes['/p1'] = html(page('Page 1', prose('Topic number 1, now renovated')));
  site.routes['/p2'] = { status: 404, body: 'gone' };
  site.routes['/'] = html(page('Home', prose('Home'), ['/p0', '/p1', '/p2', '/p3', '/p4']));
  site.routes['/p4'] = html(page('Page 4', prose('A brand new page')));
  const second = await crawl({ websiteId: first.job.websiteId });
  assert.equal(second.job.status, 'completed', JSON.stringify(second.job));
  // The root lists its links in its text: a new link changes it.
  assert.deepEqual(second.job.changes, { new: 1, changed: 2, same: 2, removed: 1 });
  const byPath = Object.fromEntries(second.changedPages.map((p) => [new URL(p.url).pathname, p.changeStatus]));
  assert.deepEqual(byPath, { '/': 'changed', '/p1': 'changed', '/p2': 'removed', '/p4': 'new' });
  const item = await websiteItem(app, tenant.key, first.job.websiteId);
  assert.deepEqual((item.latestJob as JobBody).changes, second.job.changes, 'the website item carries the job with its changes');
  for (const p of item.pages) assert.deepEqual(Object.keys(p).sort(), ['canonicalUrl', 'chunkCount', 'displayOrder', 'enabled', 'path', 'sourceId', 'tokens', 'updatedAt', 'url']);
});

test('events: knowledge.crawl.completed (with changes) and knowledge.crawl.failed, delivered as webhooks', async () => {
  const receiver = await startReceiver();
  try {
    const subscription = await app.api(tenant.key, 'POST', '/webhooks', { url: receiver.url, events: ['knowledge.crawl.completed', 'knowledge.crawl.failed'] });
    assert.equal(subscription.statusCode, 201, subscription.body);
    const site = await linkedSite(2);
    const done = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 10 });
    assert.equal(done.job.status, 'completed');
    site.routes['/robots.txt'] = { status: 503, body: 'down' };
    const failed = await crawl({ websiteId: done.job.websiteId });
    assert.equal(failed.job.status, 'failed');

    const events = await eventually(async () => {
      const bodies = receiver.received.map((r) => JSON.parse(r.body) as { type: string; tenantId: string; data: Record<string, unknown> });
      const mine = bodies.filter((b) => b.data.websiteId === done.job.websiteId);
      return mine.length >= 2 ? mine : undefined;
    }, 15_000, 'two crawl events');
    const completed = events.find((e) => e.type === 'knowledge.crawl.completed')!;
    assert.equal(completed.tenantId, tenant.tenantId);
    assert.deepEqual(completed.data, {
      jobId: done.job.jobId,
      websiteId: done.job.websiteId,
      websiteGenerationId: done.job.websiteGenerationId,
      status: 'completed',
      changes: { new: 3, changed: 0, same: 0, removed: 0 },
    });
    const failure = events.find((e) => e.type === 'knowledge.crawl.failed')!;
    assert.deepEqual(failure.data, { jobId: failed.job.jobId, websiteId: done.job.websiteId, websiteGenerationId: failed.job.websiteGenerationId, status: 'failed' });

    const types = (await app.api(tenant.key, 'GET', '/webhooks')).json();
    assert.ok(JSON.stringify(types).includes('knowledge.crawl.completed'));
    const reader = await app.tenantWithKey(['webhooks:write']);
    const refused = await app.api(reader.key, 'POST', '/webhooks', { url: receiver.url, events: ['knowledge.crawl.failed'] });
    assert.equal(refused.statusCode, 403, 'a key without knowledge:read cannot subscribe to crawl events');
  } finally {
    await receiver.close();
  }
});

/** A route that answers with an ETag (and Last-Modified) and 304 to a request that sends them back. */
function validated(body: string, etag: string, lastModified?: string, seen?: string[]): Routes[string] {
  return (req) => {
    const conditional = req.headers['if-none-match'] ?? req.headers['if-modified-since'];
    if (conditional) seen?.push(`${req.url} ${String(conditional)}`);
    if (req.headers['if-none-match'] === etag || (lastModified && req.headers['if-modified-since'] === lastModified)) return { status: 304, headers: { etag } };
    return { headers: { 'content-type': 'text/html; charset=utf-8', etag, ...(lastModified ? { 'last-modified': lastModified } : {}) }, body };
  };
}

test('conditional recrawl: If-None-Match / If-Modified-Since from the previous answer; 304 is same and its links are still followed', async () => {
  const seen: string[] = [];
  const stamp = 'Wed, 21 Oct 2025 07:28:00 GMT';
  const routes: Routes = {
    '/': validated(page('Home', prose('Home'), ['/a', '/b']), '"root-1"', undefined, seen),
    '/a': validated(page('A', prose('Page A'), ['/a/deep']), '"a-1"', undefined, seen),
    '/a/deep': validated(page('Deep', prose('Deep page')), '"deep-1"', undefined, seen),
    '/b': validated(page('B', prose('Page B')), '"b-1"', stamp, seen),
  };
  const site = await startSite(routes);
  sites.push(site);
  const first = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 2, maxPages: 10 });
  assert.equal(first.job.status, 'completed', JSON.stringify(first));
  assert.equal(first.job.snapshotPages, 4);
  assert.equal(seen.length, 0, `a first crawl asks unconditionally: ${seen.join(", ")}`);

  const second = await crawl({ websiteId: first.job.websiteId });
  assert.equal(second.job.status, 'completed', JSON.stringify(second));
  assert.deepEqual(second.job.changes, { new: 0, changed: 0, same: 4, removed: 0 });
  assert.equal(second.job.progress.chunksEmbedded, 0);
  assert.deepEqual(second.changedPages, []);
  assert.deepEqual(seen.sort(), ['/ "root-1"', '/a "a-1"', '/a/deep "deep-1"', '/b "b-1"'].sort(), 'every page asked with its validator');
  const item = await websiteItem(app, tenant.key, first.job.websiteId);
  assert.deepEqual(item.pages.map((p) => p.path), ['/', '/a', '/b', '/a/deep'], 'links of 304 pages were followed, in the same order');
  assert.equal(item.chunkCount, first.job.chunks);
  const titles = await app.runtime.services.db.query<{ title: string }>(
    `SELECT title FROM knowledge_sources WHERE website_generation_id = $1 ORDER BY display_order`, [second.job.websiteGenerationId]);
  assert.deepEqual(titles.map((t) => t.title), ['Home', 'A', 'B', 'Deep'], 'an unread page keeps its title');

  site.routes['/a'] = validated(page('A', prose('Page A, renovated'), ['/a/deep']), '"a-2"', undefined, seen);
  site.routes['/b'] = validated(page('B', prose('Page B')), '"b-2"', undefined, seen);
  seen.length = 0;
  const third = await crawl({ websiteId: first.job.websiteId });
  assert.deepEqual(third.job.changes, { new: 0, changed: 1, same: 3, removed: 0 }, '/b answered 200 with the same text: same');
  assert.deepEqual(third.changedPages.map((p) => new URL(p.url).pathname), ['/a']);
  assert.ok(seen.includes(`/b ${stamp}`) || seen.includes('/b "b-1"'));
});

test('sitemap lastmod: a page not modified since its last fetch is carried over unrequested; a later lastmod is fetched', async () => {
  const seen: string[] = [];
  const lastmods: Record<string, string> = { '/': '2020-01-01', '/a': '2020-01-01T10:00:00Z', '/b': '2020-01-01' };
  const routes: Routes = {
    '/': html(page('Home', prose('Home'), ['/a', '/b'])),
    '/a': validated(page('A', prose('Page A'), ['/c']), '"a-1"', undefined, seen),
    '/b': html(page('B', prose('Page B'))),
    '/c': validated(page('C', prose('Page C, linked from A only')), '"c-1"', undefined, seen),
    '/sitemap.xml': () => ({
      headers: { 'content-type': 'application/xml' },
      body: `<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">${Object.entries(lastmods)
        .map(([path, lastmod]) => `<url><loc>${site.origin}${path}</loc><lastmod>${lastmod}</lastmod></url>`).join('')}</urlset>`,
    }),
  };
  const site = await startSite(routes);
  sites.push(site);
  const first = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 2, maxPages: 10 });
  assert.equal(first.job.status, 'completed', JSON.stringify(first));
  assert.deepEqual(first.job.changes, { new: 4, changed: 0, same: 0, removed: 0 });
  // /about (a link of the pages' chrome) answers 404: a failed page, requested by every crawl.
  assert.deepEqual(pageRequests(site).sort(), ['/', '/a', '/about', '/b', '/c'], 'a first crawl requests every page, whatever the sitemap says');
  const afterFirst = new Date(Date.now() + 1).toISOString();

  site.requests.length = 0;
  const second = await crawl({ websiteId: first.job.websiteId });
  assert.equal(second.job.status, 'completed', JSON.stringify(second));
  assert.deepEqual(second.job.changes, { new: 0, changed: 0, same: 4, removed: 0 });
  assert.deepEqual(pageRequests(site).sort(), ['/about', '/c'], 'pages whose lastmod is older than their fetch are not requested; /c is not in the sitemap');
  assert.deepEqual(seen, ['/c "c-1"'], '/c is asked conditionally');
  const item = await websiteItem(app, tenant.key, first.job.websiteId);
  assert.deepEqual(item.pages.map((p) => p.path), ['/', '/a', '/b', '/c'], 'links of a page carried over are followed');
  assert.equal(item.chunkCount, first.job.chunks);

  // The sitemap reports, late, a change made after the first crawl: /b was carried over by the second crawl
  // without a request, so it still counts from the first crawl's fetch, and is fetched now.
  site.routes['/b'] = html(page('B', prose('Page B, renovated')));
  lastmods['/b'] = afterFirst;
  site.requests.length = 0;
  const third = await crawl({ websiteId: first.job.websiteId });
  assert.equal(third.job.status, 'completed', JSON.stringify(third));
  assert.deepEqual(third.job.changes, { new: 0, changed: 1, same: 3, removed: 0 });
  assert.deepEqual(third.changedPages.map((p) => new URL(p.url).pathname), ['/b']);
  assert.deepEqual(pageRequests(site).sort(), ['/about', '/b', '/c']);
  const fetched = await app.runtime.services.db.query<{ path: string; http_fetched_at: Date | null }>(
    `SELECT path, http_fetched_at FROM knowledge_sources WHERE website_generation_id = $1`, [third.job.websiteGenerationId]);
  const at = Object.fromEntries(fetched.map((r) => [r.path, r.http_fetched_at?.getTime()]));
  assert.ok(at['/b'] !== undefined && at['/b'] > Date.parse(afterFirst), 'the fetched page has its new fetch time');
  assert.ok(at['/a'] !== undefined && at['/a'] < Date.parse(afterFirst), 'a page carried over keeps the first fetch time');
});

test('429 and 503 with Retry-After are waited for and asked again; a wait past the deadline is a failed page', async () => {
  const asked: Array<{ path: string; at: number }> = [];
  const busy = (status: number, retryAfter: string, times: number): Routes[string] => {
    let left = times;
    return (req) => {
      asked.push({ path: req.url ?? '', at: Date.now() });
      if (left-- > 0) return { status, headers: { 'retry-after': retryAfter }, body: 'busy' };
      return html(page(`Now ${req.url}`, prose(`Served after waiting ${req.url}`)));
    };
  };
  const site = await linkedSite(0, {
    '/': html(page('Home', prose('Home'), ['/limited', '/maintenance', '/closed'])),
    '/limited': busy(429, '1', 1),
    '/maintenance': busy(503, new Date(Date.now() + 1500).toUTCString(), 1),
    '/closed': busy(503, '3600', 5),
  });
  const { job, failedPages } = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 10 });
  assert.equal(job.status, 'completed', JSON.stringify(job));
  const item = await websiteItem(app, tenant.key, job.websiteId);
  assert.deepEqual(item.pages.map((p) => p.path).sort(), ['/', '/limited', '/maintenance']);
  const limited = asked.filter((a) => a.path === '/limited');
  assert.equal(limited.length, 2);
  assert.ok(limited[1].at - limited[0].at >= 900, `asked again after ${limited[1].at - limited[0].at} ms`);
  assert.equal(asked.filter((a) => a.path === '/maintenance').length, 2);
  const closed = failedPages.find((f) => f.url.endsWith('/closed'));
  assert.equal(closed?.code, 'http_status', JSON.stringify(failedPages));
  assert.equal(asked.filter((a) => a.path === '/closed').length, 1, 'an hour is past the 30 s deadline: not waited for');
});

test('a recrawl of a site whose name no longer resolves fails with host_not_found; the current generation stays', async () => {
  const site = await linkedSite(2);
  const root = `http://hotel.test:${site.port}/`;
  const first = await crawl({ rootUrl: root, crawlDepth: 1, maxPages: 10 });
  assert.equal(first.job.status, 'completed', JSON.stringify(first.job));
  vanished = true;
  // A vanished site keeps no connection open either: the next request has to resolve the name.
  site.dropConnections();
  try {
    const again = await crawl({ websiteId: first.job.websiteId });
    assert.equal(again.job.status, 'failed');
    assert.equal(again.job.error?.code, 'host_not_found', JSON.stringify(again.job.error));
    assert.match(again.job.error?.message ?? '', /hotel\.test/);
    const item = await websiteItem(app, tenant.key, first.job.websiteId);
    assert.equal(item.currentGenerationId, first.job.websiteGenerationId, 'the current generation is untouched');
    assert.equal(item.totalPages, 3);
    assert.equal(item.status, 'failed');
  } finally {
    vanished = false;
  }
});
