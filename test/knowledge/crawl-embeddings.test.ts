import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { html, page, prose, startSite, type FixtureSite } from '../fixtures/site/server.js';
import { finished, websiteItem, type JobBody } from '../fixtures/site/helpers.js';

// A crawl with an OpenAI-compatible embeddings endpoint (EMBEDDINGS_URL): each batch's new chunks are embedded
// before they are written, and an endpoint that refuses fails the crawl with embedding_failed while the current
// generation stays as it was.

let app: TestApp;
let site: FixtureSite;
let endpoint: Awaited<ReturnType<typeof startReceiver>>;
let tenant: { tenantId: string; key: string };
let refusing = false;

before(async () => {
  endpoint = await startReceiver((_req, res, received) => {
    if (refusing) return void res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"bad model"}');
    const { input } = JSON.parse(received.body) as { input: string[] };
    const data = input.map((text, index) => ({ index, embedding: [text.length, 1, 0] }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }));
  });
  site = await startSite({
    '/': html(page('Home', prose('Home'), ['/rooms', '/spa'])),
    '/rooms': html(page('Rooms', prose('Rooms and suites'))),
    '/spa': html(page('Spa', prose('Spa and pool'))),
  });
  app = await startTestApp({
    env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', EMBEDDINGS_URL: endpoint.url, EMBEDDINGS_MODEL: 'test-model' },
    startWorkers: true,
  });
  tenant = await app.tenantWithKey(['knowledge:write']);
});
after(async () => {
  await app.close();
  await site.close();
  await endpoint.close();
});

async function crawl(body: Record<string, unknown>) {
  const res = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', body);
  assert.equal(res.statusCode, 202, res.body);
  return finished(app, tenant.key, (res.json().job as JobBody).jobId);
}

test('chunks are written with their vectors; a refusing endpoint fails the crawl and keeps the current generation', async () => {
  const { job: first } = await crawl({ rootUrl: `${site.origin}/`, crawlDepth: 1, maxPages: 10 });
  assert.equal(first.status, 'completed', JSON.stringify(first.error));
  const chunks = first.chunks ?? 0;
  assert.ok(chunks > 0);
  assert.equal(first.progress.chunksEmbedded, chunks, 'every chunk embedded');
  const rows = await app.runtime.services.db.query<{ text: string; embedding: number[] | null; embedding_model: string | null }>(
    `SELECT c.text, c.embedding, c.embedding_model FROM knowledge_chunks c JOIN knowledge_sources s ON s.id = c.source_id
     WHERE s.website_generation_id = $1`,
    [first.websiteGenerationId],
  );
  assert.equal(rows.length, chunks);
  for (const row of rows) {
    assert.equal(row.embedding_model, 'remote:test-model');
    assert.deepEqual(row.embedding?.map(Number), [row.text.length, 1, 0], "the endpoint's vector of that very chunk");
  }

  site.routes['/spa'] = html(page('Spa', prose('Spa, pool and sauna, open late')));
  refusing = true;
  const { job } = await crawl({ websiteId: first.websiteId });
  assert.equal(job.status, 'failed');
  assert.equal(job.error?.code, 'embedding_failed');
  assert.match(job.error?.message ?? '', /HTTP 400/);
  const item = await websiteItem(app, tenant.key, first.websiteId);
  assert.equal(item.currentGenerationId, first.websiteGenerationId, 'the current generation is untouched');
  const staging = await app.runtime.services.db.query('SELECT id FROM knowledge_website_generations WHERE id = $1', [job.websiteGenerationId]);
  assert.equal(staging.length, 0, "the failed crawl's staging generation is discarded");
});
