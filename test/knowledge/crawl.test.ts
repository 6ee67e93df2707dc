import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { html, page, prose, startSite, type FixtureSite } from '../fixtures/site/server.js';
import { addWebsite, finished, websiteItem, type JobBody } from '../fixtures/site/helpers.js';

let app: TestApp;
let site: FixtureSite;
let tenant: { tenantId: string; key: string };

const ENV = {
  UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true',
  // Generous for a loaded CI machine; the slow page waits well past it.
  CRAWL_FETCH_TIMEOUT_MS: '2000',
  CRAWL_CONCURRENCY_PER_HOST: '3',
};

/**
 * The fixture site. Root links: about (→ team → deep), rooms with a trailing slash and again with tracking
 * parameters and a fragment, a private page robots.txt disallows, a redirect, a canonical duplicate of
 * about, a 500, a slow page, a thin page, an off-site page and the blog. The sitemap adds an unlinked page.
 */
function routes(origin: string) {
  const offsite = origin.replace('127.0.0.1', 'localhost');
  return {
    '/robots.txt': { body: 'User-agent: *\nDisallow: /private\n\nUser-agent: other-bot\nDisallow: /\n' },
    '/sitemap.xml': {
      headers: { 'content-type': 'application/xml' },
      body: `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>${origin}/</loc></url><url><loc>${origin}/hidden</loc></url><url><loc>https://elsewhere.example/x</loc></url></urlset>`,
    },
    '/': html(page('Hotel Sol', prose('Welcome'), [
      '/about', '/rooms/', '/rooms/?utm_source=mail&utm_medium=x#prices', '/private/secret', '/old', '/dup', '/broken', '/slow', '/thin',
      `${offsite}/offsite`, '/blog', 'mailto:desk@hotel.example', 'javascript:void(0)',
    ])),
    '/about': html(page('About us', prose('About the hotel'), ['/about/team'])),
    '/about/team': html(page('Our team', prose('The team'), ['/about/team/deep'])),
    '/about/team/deep': html(page('Deep page', prose('Deep'))),
    '/rooms/': html(page('Rooms', prose('Rooms and suites', 5))),
    '/private/secret': html(page('Secret', prose('Secret'))),
    '/old': { status: 301, headers: { location: '/new' } },
    '/new': html(page('New page', prose('The new page'))),
    '/dup': html(page('About us (print)', prose('About the hotel'), [], `<link rel="canonical" href="${origin}/about">`)),
    '/broken': { status: 500, body: 'boom' },
    '/slow': { ...html(page('Slow', prose('Slow'))), delayMs: 5000 },
    '/thin': html('<html><body><main><p>Hi</p></main></body></html>'),
    '/offsite': html(page('Off site', prose('Off site'))),
    '/blog': html(page('Blog', prose('Blog'), ['/blog/post-1'])),
    '/blog/post-1': html(page('Post 1', prose('First post'))),
    '/hidden': html(page('Hidden', prose('Hidden offers'))),
  };
}

before(async () => {
  app = await startTestApp({ env: ENV });
  site = await startSite({});
  site.routes = routes(site.origin);
  tenant = await app.tenantWithKey(['knowledge:write']);
});
after(async () => {
  await app.close();
  await site.close();
});

let firstJob: JobBody;
let websiteId: string;

test('a new website is queued; a second crawl while one is queued is 409; the job list shows it', async () => {
  const website = await addWebsite(app, tenant.tenantId, { rootUrl: `${site.origin}/`, crawlDepth: 2, maxPages: 50, title: 'Hotel Sol' });
  websiteId = website.websiteId;
  assert.equal(website.sourceType, 'website');
  assert.equal(website.status, 'crawling');
  assert.equal(website.rootUrl, `${site.origin}/`);
  assert.equal(website.normalizedRootUrl, `${site.origin}/`);
  assert.equal(website.totalPages, 0);
  firstJob = website.latestJob;
  assert.equal(firstJob.status, 'queued');
  assert.equal(firstJob.progress.phase, 'queued');
  assert.equal(firstJob.websiteId, websiteId);
  assert.equal(firstJob.sourceId, website.sourceId);
  assert.equal(firstJob.crawlDepth, 2);
  assert.equal(firstJob.maxPages, 50);
  assert.ok(firstJob.websiteGenerationId);

  const again = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { websiteId });
  assert.equal(again.statusCode, 409, again.body);
  assert.equal(again.json().error.code, 'M2M_CONFLICT');
  assert.equal(again.json().error.details.jobId, firstJob.jobId);

  const list = await app.api(tenant.key, 'GET', '/knowledge/url/crawl');
  assert.equal(list.statusCode, 200, list.body);
  assert.deepEqual(list.json().jobs.map((j: JobBody) => j.jobId), [firstJob.jobId]);
  assert.equal(site.requests.length, 0, 'nothing is fetched before a worker runs the job');
});

test('the crawl: depth, robots, sitemap, redirects, canonical duplicates, failures, off-site links', async () => {
  await app.runtime.startWorkers();
  const { job, failedPages } = await finished(app, tenant.key, firstJob.jobId);
  assert.equal(job.status, 'completed', JSON.stringify(job));
  assert.equal(job.progress.phase, 'finalizing');
  assert.ok(job.startedAt && job.completedAt);

  const item = await websiteItem(app, tenant.key, websiteId);
  const paths = item.pages.map((p) => p.path).sort();
  assert.deepEqual(paths, ['/', '/about', '/about/team', '/blog', '/blog/post-1', '/hidden', '/new', '/rooms'].sort());
  assert.equal(job.snapshotPages, 8);
  assert.equal(item.status, 'idle');
  assert.equal(item.currentGenerationId, job.websiteGenerationId);
  assert.deepEqual(item.latestJob, job, 'the inventory item carries its latest crawl job, as GET /knowledge/url/crawl/{jobId} shows it');
  assert.equal(item.totalPages, 8);
  assert.equal(item.enabledPages, 8);
  const chunks = item.pages.reduce((sum, p) => sum + p.chunkCount, 0);
  assert.ok(chunks >= 8);
  assert.equal(item.chunkCount, chunks);
  assert.equal(job.chunks, chunks);
  assert.equal(job.progress.chunksEmbedded, chunks, 'a first crawl embeds every chunk');
  assert.equal(item.selectedTokens, item.pages.reduce((sum, p) => sum + p.tokens, 0));
  assert.equal(item.activeTokens, item.selectedTokens);
  const rooms = item.pages.find((p) => p.path === '/rooms')!;
  assert.equal(rooms.canonicalUrl, `${site.origin}/rooms`, 'one trailing-slash policy, tracking parameters and fragment dropped');
  const moved = item.pages.find((p) => p.path === '/new')!;
  assert.equal(moved.url, `${site.origin}/new`, 'a redirected page is stored at the URL that answered');

  const requested = site.paths();
  const count = (path: string) => requested.filter((p) => p === path).length;
  assert.equal(count('/robots.txt'), 1);
  assert.equal(count('/private/secret'), 0, 'robots.txt disallows /private');
  assert.equal(count('/about/team/deep'), 0, 'three hops away: beyond crawlDepth 2');
  assert.equal(count('/rooms/'), 1, 'the same page linked twice is fetched once');
  assert.equal(count('/about'), 1);
  assert.equal(count('/old'), 1);
  assert.equal(count('/new'), 1);
  assert.equal(site.requests.some((r) => r.startsWith('localhost')), false, 'off-site links are not followed');

  const byCode = Object.fromEntries(failedPages.map((f) => [new URL(f.url).pathname, f.code]));
  assert.deepEqual(byCode, { '/broken': 'http_status', '/slow': 'timeout', '/thin': 'thin_content' });
  assert.ok(job.progress.pagesDiscovered >= 12, `discovered ${job.progress.pagesDiscovered}`);
  assert.ok(job.progress.pagesProcessed >= 11);

  const db = app.runtime.services.db;
  const vectors = await db.query<{ n: number; dims: number }>(
    `SELECT count(*)::int AS n, min(array_length(c.embedding, 1))::int AS dims FROM knowledge_chunks c JOIN knowledge_sources s ON s.id = c.source_id
     WHERE s.website_generation_id = $1 AND c.embedding IS NOT NULL`,
    [job.websiteGenerationId],
  );
  assert.equal(vectors[0].n, chunks, 'every chunk keeps its vector');
  assert.equal(vectors[0].dims, 256);

  const all = (await app.api(tenant.key, 'GET', '/knowledge/url/crawl?status=all')).json().jobs;
  assert.equal(all.length, 1);
  assert.deepEqual((await app.api(tenant.key, 'GET', '/knowledge/url/crawl')).json().jobs, [], 'no active job');
});

test('a recrawl with one page changed re-embeds only that page; the previous generation is superseded', async () => {
  const db = app.runtime.services.db;
  const before = await websiteItem(app, tenant.key, websiteId);
  const aboutBefore = before.pages.find((p) => p.path === '/about')!;
  site.routes['/about'] = html(page('About us', prose('About the renovated hotel', 6), ['/about/team']));

  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { websiteId });
  assert.equal(res.statusCode, 202, res.body);
  const queued = res.json().job as JobBody;
  assert.ok(['queued', 'running'].includes(queued.status));
  assert.notEqual(queued.websiteGenerationId, firstJob.websiteGenerationId);
  const { job } = await finished(app, tenant.key, queued.jobId);
  assert.equal(job.status, 'completed', JSON.stringify(job));

  const after = await websiteItem(app, tenant.key, websiteId);
  assert.equal((after.latestJob as JobBody).jobId, queued.jobId, 'latestJob follows the newest crawl');
  const aboutAfter = after.pages.find((p) => p.path === '/about')!;
  assert.equal(job.progress.chunksEmbedded, aboutAfter.chunkCount, 'only the changed page was embedded');
  assert.notEqual(aboutAfter.sourceId, aboutBefore.sourceId, 'each generation has its own page rows');
  assert.equal(after.currentGenerationId, job.websiteGenerationId);
  assert.equal(after.totalPages, 8);

  const states = await db.query<{ id: string; state: string }>('SELECT id, state FROM knowledge_website_generations WHERE website_id = $1', [websiteId]);
  const stateOf = Object.fromEntries(states.map((s) => [s.id, s.state]));
  assert.equal(stateOf[firstJob.websiteGenerationId!], 'superseded');
  assert.equal(stateOf[job.websiteGenerationId!], 'current');

  // An unchanged page's chunks were copied with their vectors, not recomputed.
  const rooms = (p: typeof after.pages) => p.find((x) => x.path === '/rooms')!.sourceId;
  const vector = async (sourceId: string) =>
    (await db.query<{ e: number[] }>('SELECT embedding AS e FROM knowledge_chunks WHERE source_id = $1 AND seq = 0', [sourceId]))[0].e;
  assert.deepEqual(await vector(rooms(after.pages)), await vector(rooms(before.pages)));
});

test('selection rules: path prefix, exact page, required page, defaultEnabled; counters stay true', async () => {
  site.routes['/unlinked'] = html(page('Unlinked', prose('Unlinked but required')));
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', {
    websiteId,
    defaultEnabled: true,
    selectionRules: [
      { kind: 'path', key: '/blog', enabled: false },
      { kind: 'page', key: '/about', enabled: false },
      { kind: 'required', key: `${site.origin}/unlinked`, enabled: true },
    ],
  });
  assert.equal(res.statusCode, 202, res.body);
  const { job } = await finished(app, tenant.key, res.json().job.jobId);
  assert.equal(job.status, 'completed', JSON.stringify(job));
  const item = await websiteItem(app, tenant.key, websiteId);
  const enabled = Object.fromEntries(item.pages.map((p) => [p.path, p.enabled]));
  assert.equal(enabled['/blog'], false);
  assert.equal(enabled['/blog/post-1'], false);
  assert.equal(enabled['/about'], false);
  assert.equal(enabled['/unlinked'], true, 'a required page is crawled though nothing links to it');
  assert.equal(enabled['/rooms'], true);
  assert.equal(item.totalPages, 9);
  assert.equal(item.enabledPages, 6);
  const on = item.pages.filter((p) => p.enabled);
  assert.equal(item.chunkCount, on.reduce((sum, p) => sum + p.chunkCount, 0));
  assert.equal(item.selectedTokens, on.reduce((sum, p) => sum + p.tokens, 0));
  assert.deepEqual(item.selectionRules, [
    { kind: 'path', key: '/blog', enabled: false },
    { kind: 'page', key: '/about', enabled: false },
    { kind: 'required', key: `${site.origin}/unlinked`, enabled: true },
  ]);
  const row = (await app.runtime.services.db.query<{ chunk_count: number; tokens: number }>(
    'SELECT chunk_count, tokens FROM knowledge_sources WHERE id = $1', [item.sourceId],
  ))[0];
  assert.deepEqual(row, { chunk_count: item.chunkCount, tokens: item.selectedTokens }, 'the website row counts enabled pages');
});

test('maxPages counts enabled pages only (after selection rules)', async () => {
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', {
    rootUrl: `${site.origin}/`, crawlDepth: 3, maxPages: 2, scope: 'global', title: 'Small snapshot',
    defaultEnabled: false, selectionRules: [{ kind: 'path', key: '/about', enabled: true }],
  });
  assert.equal(res.statusCode, 409, 'same root URL and scope as the first website');
  assert.equal(res.json().error.details.websiteId, websiteId);

  const property = (await app.admin<{ propertyId: string }>('POST', `/tenants/${tenant.tenantId}/properties`, { name: 'Beach' })).propertyId;
  const created = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', {
    rootUrl: `${site.origin}/`, crawlDepth: 3, maxPages: 2, scope: 'property', propertyId: property,
    defaultEnabled: false, selectionRules: [{ kind: 'path', key: '/about', enabled: true }],
  });
  assert.equal(created.statusCode, 202, created.body);
  const { job } = await finished(app, tenant.key, created.json().job.jobId);
  assert.equal(job.status, 'completed', JSON.stringify(job));
  const item = await websiteItem(app, tenant.key, job.websiteId);
  assert.equal(item.enabledPages, 2, 'two enabled pages: /about and /about/team');
  assert.deepEqual(item.pages.filter((p) => p.enabled).map((p) => p.path).sort(), ['/about', '/about/team']);
  assert.ok(Number(item.totalPages) > 2, 'disabled pages are kept (and do not count)');
  assert.equal(item.scope, 'property');
  assert.equal(item.propertyId, property);
});
