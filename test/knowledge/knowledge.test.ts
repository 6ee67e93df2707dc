import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { chunkText } from '../../src/knowledge/chunker.js';
import { encode } from '../../src/knowledge/tokenizer.js';
import { b64, buildDocx, buildPdf } from '../fixtures/knowledge/build.js';
import { READ, WRITE, addProperty, chunksOf, ingested, listItems, textSource } from '../fixtures/knowledge/helpers.js';

let app: TestApp;
let site: http.Server;
let base: string;

const PAGE = `<!doctype html><html><head><title>Hotel Sol FAQ</title><style>.x{}</style><script>var secret = "tracking";</script></head>
<body><nav><a href="/">Home</a> <a href="/rooms">Rooms</a></nav>
<main><h1>Frequently asked questions</h1><p>Check-in starts at <b>3 pm</b> and check-out is at 11 am.</p>
<h2>Parking</h2><p>Free parking is available behind the hotel.</p><ul><li>Electric chargers</li><li>Bike racks</li></ul></main>
<footer>© Hotel Sol</footer></body></html>`;

before(async () => {
  site = http.createServer((req, res) => {
    if (req.url === '/faq') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    else if (req.url === '/moved') res.writeHead(301, { location: '/faq' }).end();
    else if (req.url === '/guide.pdf') res.writeHead(200, { 'content-type': 'application/pdf' }).end(buildPdf([['The sauna opens at 6 pm.']]));
    else if (req.url === '/latin') res.writeHead(200, { 'content-type': 'text/plain; charset=iso-8859-1' }).end(Buffer.from('Caf\xe9 au lait served all day.', 'latin1'));
    else if (req.url === '/big') res.writeHead(200, { 'content-type': 'text/plain' }).end('a'.repeat(200_000));
    else if (req.url === '/flaky') res.writeHead(503).end();
    else res.writeHead(404).end('not here');
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', DATA_DIR: 'memory://', KNOWLEDGE_FETCH_MAX_BYTES: '65536' } });
});
after(async () => {
  await app.close();
  site.closeAllConnections();
  await new Promise<void>((resolve) => site.close(() => resolve()));
});

/** The stored chunks are exactly what the chunker makes of `text`, and every count is the tokenizer's. */
async function assertChunks(tenantId: string, sourceId: string, text: string) {
  const row = await ingested(app, tenantId, sourceId);
  assert.equal(row.ingest_status, 'ready', row.ingest_error ?? '');
  const stored = await chunksOf(app, sourceId);
  const expected = await chunkText(text);
  assert.deepEqual(stored.map((c) => c.text), expected.map((c) => c.text));
  for (const chunk of stored) assert.equal(chunk.tokens, encode(chunk.text).length);
  assert.equal(row.chunk_count, stored.length);
  assert.equal(row.tokens, stored.reduce((sum, c) => sum + c.tokens, 0));
  return { row, stored };
}

function longMarkdown(sections: number, paragraphs = 16): string {
  const out: string[] = [];
  for (let s = 1; s <= sections; s += 1) {
    out.push(`## Section ${s}: rooms and services`);
    for (let p = 0; p < paragraphs; p += 1) out.push(`Paragraph ${p} of section ${s}. The hotel offers sea-view rooms, a spa and a rooftop bar. Breakfast is served from seven to eleven every day, and late check-out can be requested at the front desk.`);
  }
  return out.join('\n\n');
}

test('a text source is chunked on heading and paragraph boundaries with real token counts', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  const text = longMarkdown(8);
  const created = await textSource(app, tenantId, { title: 'House rules', text });
  assert.equal(created.sourceType, 'text');
  assert.equal(created.chunkCount, 0, 'nothing is indexed until the job runs');
  assert.equal(created.text, text);
  const { row, stored } = await assertChunks(tenantId, created.sourceId, text);
  assert.ok(stored.length >= 4, `expected several chunks, got ${stored.length}`);
  assert.ok(stored.every((c) => c.tokens <= 520), 'chunks stay near 500 tokens');
  assert.ok(stored.every((c) => !/\S$/.test(c.text) || /[.:\w]$/.test(c.text)), 'chunks end at a boundary');
  // Consecutive chunks inside one section overlap: the next one starts with the tail of the previous one.
  const overlapping = stored.slice(1).filter((c, i) => !c.text.startsWith('## ') && stored[i].text.includes(c.text.split('\n\n')[0]));
  assert.ok(overlapping.length > 0, 'chunks within a section overlap');

  const listed = (await listItems(app, key)).json().items[0];
  assert.equal(listed.sourceId, created.sourceId);
  assert.equal(listed.chunkCount, row.chunk_count);
  assert.equal(listed.activeTokens, row.tokens);
  assert.equal(listed.preview, text.replace(/\s+/g, ' ').slice(0, 199).trimEnd() + '…');
  assert.equal(listed.text, undefined, 'the inventory carries the preview, not the whole text');
});

test('an inactive source is ingested but has no active tokens', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  const created = await textSource(app, tenantId, { title: 'Old menu', text: 'Soup of the day.', active: false });
  const row = await ingested(app, tenantId, created.sourceId);
  assert.equal(row.chunk_count, 1);
  const item = (await listItems(app, key)).json().items[0];
  assert.equal(item.active, false);
  assert.equal(item.chunkCount, 1);
  assert.equal(item.activeTokens, 0);
});

test('file sources: Markdown, HTML, PDF and DOCX are extracted and chunked', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  const file = (filename: string, contentType: string, bytes: Buffer | string) =>
    app.admin<{ sourceId: string; originalFile: Record<string, unknown> }>('POST', `/tenants/${tenantId}/knowledge/sources`, {
      sourceType: 'file',
      title: filename,
      file: { filename, contentType, contentBase64: b64(bytes) },
    });

  const markdown = longMarkdown(3, 6);
  const md = await file('rules.md', 'text/markdown', markdown);
  assert.equal(md.originalFile.filename, 'rules.md');
  assert.equal(md.originalFile.size, Buffer.byteLength(markdown));
  await assertChunks(tenantId, md.sourceId, markdown);

  const html = await file('faq.html', 'text/html', PAGE);
  const { stored: htmlChunks } = await assertChunks(
    tenantId,
    html.sourceId,
    '# Frequently asked questions\n\nCheck-in starts at 3 pm and check-out is at 11 am.\n\n## Parking\n\nFree parking is available behind the hotel.\n\n- Electric chargers\n\n- Bike racks',
  );
  assert.ok(!htmlChunks.some((c) => /tracking|Home|©/.test(c.text)), 'scripts, navigation and footers are dropped');

  const pdf = await file('guide.pdf', 'application/pdf', buildPdf([['Welcome to Hotel Sol.', 'The pool opens at 9 am.'], ['Page two: the spa.']]));
  await assertChunks(tenantId, pdf.sourceId, 'Welcome to Hotel Sol.\nThe pool opens at 9 am.\n\nPage two: the spa.');

  const docx = await file(
    'spa.docx',
    'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    buildDocx([{ heading: 1, text: 'Spa' }, { text: 'Massages from 10 to 8.' }, { heading: 2, text: 'Prices' }, { text: 'Fifty euros per hour.' }]),
  );
  await assertChunks(tenantId, docx.sourceId, '# Spa\n\nMassages from 10 to 8.\n\n## Prices\n\nFifty euros per hour.');

  const items = (await listItems(app, key, { sourceType: 'file' })).json().items;
  assert.equal(items.length, 4);
  assert.ok(items.every((i: { sourceType: string; chunkCount: number }) => i.sourceType === 'file' && i.chunkCount >= 1));
});

test('a file whose bytes contradict its declared type is not ingested', async () => {
  const { tenantId } = await app.tenantWithKey(READ);
  const lying = await app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, {
    sourceType: 'file',
    title: 'Not a PDF',
    file: { filename: 'x.pdf', contentType: 'application/pdf', contentBase64: b64('just text') },
  });
  const row = await ingested(app, tenantId, lying.sourceId);
  assert.equal(row.ingest_status, 'failed');
  assert.match(row.ingest_error ?? '', /not a PDF/);
  assert.equal(row.chunk_count, 0);

  const binary = await app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, {
    sourceType: 'file',
    title: 'Text that is a PDF',
    file: { filename: 'x.txt', contentType: 'text/plain', contentBase64: b64(buildPdf([['hidden']])) },
  });
  assert.match((await ingested(app, tenantId, binary.sourceId)).ingest_error ?? '', /declared text\/plain, but the bytes are application\/pdf/);
});

test('url sources fetch their page (following redirects) and extract the main content', async () => {
  const { tenantId, key } = await app.tenantWithKey(READ);
  const faq = await app.admin<{ sourceId: string; url: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, {
    sourceType: 'url',
    title: 'FAQ',
    url: `${base}/moved#top`,
  });
  assert.equal(faq.url, `${base}/moved`, 'the fragment is dropped');
  const { stored } = await assertChunks(
    tenantId,
    faq.sourceId,
    '# Frequently asked questions\n\nCheck-in starts at 3 pm and check-out is at 11 am.\n\n## Parking\n\nFree parking is available behind the hotel.\n\n- Electric chargers\n\n- Bike racks',
  );
  assert.equal(stored.length, 1);

  const pdf = await app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, { sourceType: 'url', title: 'Guide', url: `${base}/guide.pdf` });
  await assertChunks(tenantId, pdf.sourceId, 'The sauna opens at 6 pm.');

  const latin = await app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, { sourceType: 'url', title: 'Café', url: `${base}/latin` });
  await assertChunks(tenantId, latin.sourceId, 'Café au lait served all day.');

  const items = (await listItems(app, key, { sourceType: 'url' })).json().items;
  assert.deepEqual(new Set(items.map((i: { sourceId: string }) => i.sourceId)), new Set([faq.sourceId, pdf.sourceId, latin.sourceId]));
});

test('url sources that answer 404, exceed the size cap or keep failing are recorded as failed', async () => {
  const { tenantId } = await app.tenantWithKey(READ);
  const create = (path: string) =>
    app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, { sourceType: 'url', title: path, url: `${base}${path}` });
  const missing = await ingested(app, tenantId, (await create('/missing')).sourceId);
  assert.equal(missing.ingest_status, 'failed');
  assert.match(missing.ingest_error ?? '', /HTTP 404/);
  const big = await ingested(app, tenantId, (await create('/big')).sourceId);
  assert.match(big.ingest_error ?? '', /larger than 65536 bytes/);
  assert.equal(big.chunk_count, 0);

  // A 503 is transient: the job is retried (with backoff), not failed at once.
  const flaky = await create('/flaky');
  await new Promise((resolve) => setTimeout(resolve, 500));
  const jobs = await app.runtime.services.db.query<{ state: string; attempts: number; last_error: string }>(
    `SELECT state, attempts, last_error FROM jobs WHERE task = 'knowledge.ingest' AND payload->>'sourceId' = $1`,
    [flaky.sourceId],
  );
  assert.equal(jobs[0].state, 'queued');
  assert.match(jobs[0].last_error, /HTTP 503/);
});

test('the public POST /knowledge/sources extension creates sources for the key’s tenant', async () => {
  const { tenantId, key } = await app.tenantWithKey(WRITE);
  const propertyId = await addProperty(app, tenantId);
  const res = await app.api(key, 'POST', '/knowledge/sources', { sourceType: 'text', title: 'Pets', text: 'Dogs are welcome.', propertyId });
  assert.equal(res.statusCode, 201, res.body);
  const { source } = res.json();
  assert.equal(source.scope, 'property');
  assert.equal(source.propertyName, 'Beach House');
  assert.deepEqual(Object.keys(source.createdBy).sort(), ['displayName', 'id']);
  await ingested(app, tenantId, source.sourceId);

  const reader = await app.tenantWithKey(READ);
  const refused = await app.api(reader.key, 'POST', '/knowledge/sources', { sourceType: 'text', title: 'x', text: 'y' });
  assert.equal(refused.statusCode, 403);
  assert.deepEqual(refused.json().error.details.missingScopes, ['knowledge:write']);
});

test('bad source input is refused with the error envelope and writes nothing', async () => {
  const { tenantId, key } = await app.tenantWithKey(WRITE);
  const other = await app.tenantWithKey(WRITE);
  const foreignProperty = await addProperty(app, other.tenantId);
  const cases: Array<[Record<string, unknown>, number, RegExp]> = [
    [{ sourceType: 'pdf', title: 'x', text: 'y' }, 400, /sourceType/],
    [{ sourceType: 'website', title: 'x', url: 'https://example.com' }, 400, /sourceType/],
    [{ sourceType: 'text', title: 'x'.repeat(161), text: 'y' }, 400, /title/],
    [{ sourceType: 'text', title: 'x' }, 400, /body\.text: is required/],
    [{ sourceType: 'text', title: 'x', text: 'y', url: 'https://example.com' }, 400, /body\.url: must be absent/],
    [{ sourceType: 'url', title: 'x', url: 'ftp://example.com/a' }, 400, /body\.url/],
    [{ sourceType: 'file', title: 'x', file: { filename: 'a.txt', contentType: 'text/plain', contentBase64: '***' } }, 400, /base64/],
    [{ sourceType: 'file', title: 'x', file: { filename: 'f'.repeat(256), contentType: 'text/plain', contentBase64: 'eA==' } }, 400, /filename/],
    [{ sourceType: 'file', title: 'x', file: { filename: 'a', contentType: 't'.repeat(129), contentBase64: 'eA==' } }, 400, /contentType/],
    [{ sourceType: 'text', title: 'x', text: 'y', scope: 'property' }, 400, /propertyId: is required/],
    [{ sourceType: 'text', title: 'x', text: 'y', scope: 'global', propertyId: foreignProperty }, 400, /must be absent/],
    [{ sourceType: 'text', title: 'x', text: 'y', propertyId: foreignProperty }, 404, /property not found/],
    [{ sourceType: 'text', title: 'x', text: 'y', extra: true }, 400, /unknown property/],
  ];
  for (const [body, status, message] of cases) {
    const res = await app.api(key, 'POST', '/knowledge/sources', body);
    assert.equal(res.statusCode, status, `${JSON.stringify(body).slice(0, 80)} → ${res.body}`);
    assert.match(res.json().error.message, message);
  }
  const rows = await app.runtime.services.db.query('SELECT id FROM knowledge_sources WHERE tenant_id = $1', [tenantId]);
  assert.equal(rows.length, 0);
  const jobs = await app.runtime.services.db.query(`SELECT id FROM jobs WHERE tenant_id = $1`, [tenantId]);
  assert.equal(jobs.length, 0);
});
