import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestApp, type TestApp } from '../helpers/app.js';
import fc from 'fast-check';
import { CHUNK_TOKENS, OVERLAP_TOKENS, chunkText, previewOf, splitBlocks } from '../../src/knowledge/chunker.js';
import { countTokens, encode } from '../../src/knowledge/tokenizer.js';
import { htmlToText } from '../../src/knowledge/extract.js';
import { FsBlobStore, createBlobStore } from '../../src/knowledge/blob-store.js';
import { GuardedFetcher } from '../../src/knowledge/fetch.js';
import { READ, ingested } from '../fixtures/knowledge/helpers.js';

test('countTokens is exactly the BPE encoding length, special-token text included', () => {
  const samples = [
    'Hello world',
    'Check-in: 3 pm.\n\nCheck-out: 11 am!!  ',
    'Café, naïve, 東京, emoji 🎉🎉, numbers 1234567',
    'text with <|endoftext|> inside',
    '   leading and trailing   \n\n\n',
    'a'.repeat(5000),
  ];
  for (const text of samples) assert.equal(countTokens(text), encode(text).length, JSON.stringify(text.slice(0, 30)));
  assert.equal(countTokens(''), 0);
  assert.equal(encode('hello world').length, 2, 'cl100k_base');
});

test('blocks: paragraphs split on blank lines, Markdown headings stand alone', () => {
  assert.deepEqual(splitBlocks('# Title\nintro line\nsecond line\n\n\n## Sub\r\n\r\nbody'), [
    { text: '# Title', heading: true },
    { text: 'intro line\nsecond line', heading: false },
    { text: '## Sub', heading: true },
    { text: 'body', heading: false },
  ]);
});

test('chunks: about 500 tokens, boundaries on paragraphs, overlap of whole sentences, new sections start fresh', async () => {
  const paragraph = (i: number) => `Paragraph ${i}. ${'The terrace bar serves cocktails until midnight. '.repeat(8).trim()}`;
  const text = ['# Bar', ...Array.from({ length: 12 }, (_, i) => paragraph(i)), '# Restaurant', ...Array.from({ length: 3 }, (_, i) => paragraph(100 + i))].join('\n\n');
  const chunks = await chunkText(text);
  assert.ok(chunks.length >= 3);
  for (const chunk of chunks) {
    assert.equal(chunk.tokens, encode(chunk.text).length);
    assert.ok(chunk.tokens <= CHUNK_TOKENS + 10, `chunk of ${chunk.tokens} tokens`);
  }
  const restaurant = chunks.findIndex((c) => c.text.startsWith('# Restaurant'));
  assert.ok(restaurant > 0, 'a heading starts a chunk');
  const second = chunks[1];
  const tail = second.text.split('\n\n')[0];
  assert.ok(chunks[0].text.endsWith(tail), 'the second chunk starts with the end of the first');
  assert.ok(countTokens(tail) <= OVERLAP_TOKENS);
  // Without the overlaps, the chunks are the text in order.
  const joined = chunks.map((c, i) => (i === 0 || c.text.startsWith('#') ? c.text : c.text.slice(c.text.indexOf('\n\n') + 2))).join('\n\n');
  assert.equal(joined.replace(/\s+/g, ' '), text.replace(/\s+/g, ' '));
});

test('chunks: a paragraph longer than a chunk splits at sentences, a run-on text into token windows', async () => {
  const long = Array.from({ length: 120 }, (_, i) => `Sentence number ${i} talks about the garden.`).join(' ');
  const chunks = await chunkText(long);
  assert.ok(chunks.length >= 2);
  assert.ok(chunks.every((c) => /\.$/.test(c.text) && c.tokens <= CHUNK_TOKENS + 10));
  const runOn = 'word '.repeat(3000);
  const windows = await chunkText(runOn);
  assert.ok(windows.length >= 6);
  assert.ok(windows.every((c) => c.tokens <= CHUNK_TOKENS + 1));
  const unicode = await chunkText('東京の天気 '.repeat(1500));
  assert.ok(unicode.every((c) => !c.text.includes('\uFFFD')), 'windows never cut a character in half');
  assert.deepEqual(await chunkText('   \n\n  '), []);
});

test('a preview is the text on one line, cut at its limit with an ellipsis, however long the text', () => {
  const flatten = (text: string, max: number) => {
    const flat = text.replace(/\s+/g, ' ').trim();
    if (!flat) return null;
    return flat.length <= max ? flat : `${flat.slice(0, max - 1).trimEnd()}…`;
  };
  assert.equal(previewOf('  Rooms\n\n and   suites '), 'Rooms and suites');
  assert.equal(previewOf(`${' \n'.repeat(5000)}Late check-out`), 'Late check-out');
  assert.equal(previewOf('word '.repeat(1000))?.length, 200);
  const text = fc.array(fc.oneof(fc.constantFrom(' ', '\n', '\t', '\u00a0', '   ', '\ud83d\ude00', 'ab', 'c'), fc.string()), { maxLength: 900 }).map((parts) => parts.join(''));
  fc.assert(fc.property(text, fc.integer({ min: 1, max: 300 }), (t, max) => assert.equal(previewOf(t, max), flatten(t, max))), { seed: 20261126, numRuns: 5_000 });
});

test('HTML to text keeps headings and lists, drops scripts, styles, navigation and comments', () => {
  const { text, title } = htmlToText(
    '<html><head><title> The  Title </title></head><body><nav>menu</nav><article><h2>Hours</h2><p>Open <em>daily</em><br>from 9</p><!-- hidden --><ul><li>Mon</li><li>Tue &amp; Wed</li></ul><script>x()</script></article></body></html>',
  );
  assert.equal(title, 'The Title');
  assert.equal(text, '## Hours\n\nOpen daily\nfrom 9\n\n- Mon\n\n- Tue & Wed');
});

test('the filesystem blob store writes atomically under DATA_DIR/blobs and refuses odd keys', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'm2m-blobs-'));
  try {
    const store = createBlobStore({ dataDir: dir, blobStore: { kind: 'filesystem' } });
    assert.ok(store instanceof FsBlobStore);
    await store.put('ten_1/ks_1', Buffer.from('hello'));
    assert.equal((await store.get('ten_1/ks_1'))?.toString(), 'hello');
    assert.deepEqual(readdirSync(path.join(dir, 'blobs', 'ten_1')), ['ks_1'], 'no temporary files left');
    assert.equal(await store.get('ten_1/ks_2'), undefined);
    await store.delete('ten_1/ks_1');
    assert.equal(await store.get('ten_1/ks_1'), undefined);
    await assert.rejects(store.put('../escape', Buffer.from('x')), /invalid blob key/);
    assert.equal(createBlobStore({ dataDir: 'memory://', blobStore: { kind: 'filesystem' } }).kind, 'memory');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

let guarded: TestApp;
let server: http.Server;
let port: number;

before(async () => {
  server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('internal secret'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  // No UNSAFE_ALLOW_PRIVATE_DESTINATIONS here; kb.example.com "resolves" to loopback.
  guarded = await startTestApp({
    startWorkers: true,
    env: { DATA_DIR: 'memory://' },
    resolver: async (host) => (host === 'kb.example.com' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '93.184.215.14', family: 4 }]),
  });
});
after(async () => {
  await guarded.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

test('url sources go through the SSRF guard: private URLs are refused, private DNS answers blocked at fetch time', async () => {
  const { tenantId } = await guarded.tenantWithKey(READ);
  for (const url of [`http://127.0.0.1:${port}/`, 'https://localhost/', 'https://10.0.0.1/', 'https://[::1]/', 'https://kb.example.com:8443/']) {
    const res = await guarded.adminRaw('POST', `/tenants/${tenantId}/knowledge/sources`, { sourceType: 'url', title: 'x', url });
    assert.equal(res.statusCode, 400, url);
    assert.match(res.json().error.message, /body\.url/);
  }
  const sneaky = await guarded.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, { sourceType: 'url', title: 'x', url: 'https://kb.example.com/' });
  const row = await ingested(guarded, tenantId, sneaky.sourceId);
  assert.equal(row.ingest_status, 'failed');
  assert.match(row.ingest_error ?? '', /non-public address 127\.0\.0\.1/);
  assert.equal(row.chunk_count, 0);
});

test('the guarded fetcher times out slow pages and refuses plain http unless private destinations are allowed', async () => {
  const redirecting = http.createServer((req, res) => {
    if (req.url === '/slow') return void setTimeout(() => res.end('late'), 2_000);
    res.writeHead(302, { location: 'http://10.1.2.3/' }).end();
  });
  await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
  const at = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}`;
  const open = new GuardedFetcher({ allowPrivate: true, timeoutMs: 300, maxBytes: 1000 });
  try {
    await assert.rejects(open.get(`${at}/slow`), (e: Error & { code?: string; permanent?: boolean }) => e.code === 'timeout' && e.permanent === false);
    const strict = new GuardedFetcher({ allowPrivate: false, timeoutMs: 300, maxBytes: 1000 });
    await assert.rejects(strict.get(`${at}/`), (e: Error & { code?: string }) => e.code === 'invalid_url');
    await strict.close();
  } finally {
    await open.close();
    redirecting.closeAllConnections();
    await new Promise<void>((resolve) => redirecting.close(() => resolve()));
  }
});
