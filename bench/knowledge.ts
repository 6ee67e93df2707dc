/**
 * Knowledge scenario. (a) GET /m2m/v1/knowledge/items?limit=200 for a tenant with 20,000 sources (seeded with
 * SQL), first page, a deep page and a title search, against a bare node:http server sending the same bytes;
 * (b) ingestion throughput: a 5 MB text file source through the real job (extract, chunk, count, store),
 * and the chunker alone in this process.
 *   node --import tsx bench/knowledge.ts [--db pglite|postgres|both] [--quick]
 * `runKnowledge()` is what `npm run bench` can call.
 */
import autocannon from 'autocannon';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { openDb } from '../src/db/driver.js';
import { chunkText } from '../src/knowledge/chunker.js';
import { countTokens } from '../src/knowledge/tokenizer.js';
import { fmt, log, printTable, round, sleep, type DbKind } from './lib.js';
import { call, dbLabel, detectPostgres, dropSchemas, newSchema, startBare, startServer, stopAllChildren, stopChild, withPg, type Server } from './procs.js';

export interface KnowledgeLoad {
  what: string;
  connections: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

export interface KnowledgeResult {
  db: DbKind;
  sources: number;
  seedSeconds: number;
  responseBytes: number;
  loads: KnowledgeLoad[];
  bare: KnowledgeLoad;
  ratioVsBare: number;
  ingestion: { textBytes: number; tokens: number; chunks: number; seconds: number; tokensPerSec: number };
  chunkerTokensPerSec: number;
}

export interface KnowledgeTiming {
  warmupS: number;
  measureS: number;
}

const SOURCES = 20_000;

const SEED = `
  INSERT INTO knowledge_sources (id, tenant_id, kind, title, text, url, active, property_id, preview, chunk_count, tokens,
    file_name, file_content_type, file_size, uploaded_at, media_type, validation_status, validation_findings, created_by, created_at, updated_at)
  SELECT 'ks_bench_' || lpad(i::text, 6, '0'), $1::text,
         CASE WHEN i % 10 = 0 THEN 'url' WHEN i % 10 = 1 THEN 'asset' ELSE 'text' END,
         'Guest guide ' || i || CASE WHEN i % 7 = 0 THEN ' pool and spa' ELSE ' rooms and breakfast' END,
         NULL,
         CASE WHEN i % 10 = 0 THEN 'https://hotel.example/pages/' || i ELSE NULL END,
         i % 13 <> 0, CASE WHEN i % 3 = 0 THEN $2::text END,
         'Breakfast is served from seven to eleven on the terrace; the pool opens at nine and towels are at the desk. Late check-out on request.',
         1 + i % 9, 400 * (1 + i % 9),
         CASE WHEN i % 10 = 1 THEN 'photo-' || i || '.png' END, CASE WHEN i % 10 = 1 THEN 'image/png' END, CASE WHEN i % 10 = 1 THEN 120000 END,
         CASE WHEN i % 10 = 1 THEN $3::timestamptz END, CASE WHEN i % 10 = 1 THEN 'image' END, CASE WHEN i % 10 = 1 THEN 'ready' END,
         CASE WHEN i % 10 = 1 THEN '[]'::jsonb END, '{"id":"admin","displayName":"Admin API"}'::jsonb,
         $3::timestamptz - i * interval '1 second', $3::timestamptz
  FROM generate_series(1, $4::int) AS i`;

type Query = (sql: string, params?: unknown[]) => Promise<unknown>;

async function seed(query: Query, tenantId: string, propertyId: string): Promise<void> {
  await query(SEED, [tenantId, propertyId, new Date().toISOString(), SOURCES]);
  await query('ANALYZE knowledge_sources');
}

/** About `bytes` of varied English-like prose in paragraphs and sections (a fixed seed, so every run is the same text). */
export function syntheticText(bytes: number): string {
  let state = 42;
  const random = () => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648);
  const syllables = ['ba', 'ri', 'to', 'mel', 'san', 'qua', 'ver', 'lo', 'den', 'ix', 'po', 'rha', 'tur', 'ni', 'gal', 'esh', 'mo', 'cu', 'fra', 'zin'];
  const vocabulary = Array.from({ length: 6000 }, (_, i) => {
    let word = '';
    for (let n = 1 + (i % 4); n > 0; n -= 1) word += syllables[Math.floor(random() * syllables.length)];
    return word;
  });
  const zipf = () => vocabulary[Math.min(vocabulary.length - 1, Math.floor(vocabulary.length ** random()) - 1)];
  const parts: string[] = [];
  let size = 0;
  for (let section = 1; size < bytes; section += 1) {
    const heading = `## Section ${section}: ${zipf()} ${zipf()}`;
    parts.push(heading);
    size += heading.length + 2;
    for (let p = 3 + Math.floor(random() * 6); p > 0 && size < bytes; p -= 1) {
      const sentences: string[] = [];
      for (let s = 2 + Math.floor(random() * 5); s > 0; s -= 1) {
        const words = Array.from({ length: 6 + Math.floor(random() * 14) }, zipf);
        sentences.push(`${words.join(' ')}${random() < 0.1 ? ', 2024' : ''}.`.replace(/^./, (c) => c.toUpperCase()));
      }
      const paragraph = sentences.join(' ');
      parts.push(paragraph);
      size += paragraph.length + 2;
    }
  }
  return parts.join('\n\n');
}

async function cannon(what: string, url: string, connections: number, seconds: number, headers: Record<string, string> = {}): Promise<KnowledgeLoad> {
  const instance = autocannon({ url, connections, duration: seconds, headers, timeout: 10 });
  const guard = setTimeout(() => instance.stop(), (seconds + 20) * 1000);
  const result = await instance;
  clearTimeout(guard);
  return { what, connections, rps: round(result.requests.total / result.duration), p50Ms: result.latency.p50, p99Ms: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

async function measure(what: string, url: string, connections: number, timing: KnowledgeTiming, headers?: Record<string, string>): Promise<KnowledgeLoad> {
  await cannon(what, url, connections, timing.warmupS, headers);
  const load = await cannon(what, url, connections, timing.measureS, headers);
  log(`  ${what}: ${fmt(load.rps)} req/s, p50 ${load.p50Ms} ms, p99 ${load.p99Ms} ms, non-2xx ${load.non2xx}, errors ${load.errors}`);
  return load;
}

async function ingest5mb(base: string, key: string, tenantId: string): Promise<KnowledgeResult['ingestion']> {
  const text = syntheticText(5 * 1024 * 1024);
  const started = Date.now();
  const source = await call<{ sourceId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/knowledge/sources`, {
    body: { sourceType: 'file', title: 'Five megabytes', file: { filename: 'big.txt', contentType: 'text/plain', contentBase64: Buffer.from(text).toString('base64') } },
  });
  const deadline = Date.now() + 300_000;
  for (;;) {
    const page = await call<{ items: Array<{ sourceId: string; chunkCount: number; activeTokens?: number }> }>(base, 'GET', '/m2m/v1/knowledge/items?limit=1&query=five%20megabytes', { token: key });
    const item = page.items.find((i) => i.sourceId === source.sourceId);
    if (item && item.chunkCount > 0) {
      const seconds = (Date.now() - started) / 1000;
      const tokens = item.activeTokens ?? 0;
      return { textBytes: Buffer.byteLength(text), tokens, chunks: item.chunkCount, seconds: round(seconds, 2), tokensPerSec: round(tokens / seconds) };
    }
    if (Date.now() > deadline) throw new Error('the 5 MB source was not ingested within 300 s');
    await sleep(100);
  }
}

export async function runKnowledge(db: DbKind, postgresUrl: string | undefined, timing: KnowledgeTiming): Promise<KnowledgeResult> {
  // A fresh DATA_DIR for both databases: the uploaded 5 MB file lands in its blobs/, never in ./data.
  const dataDir = mkdtempSync(path.join(tmpdir(), 'm2m-bench-knowledge-'));
  const schema = db === 'postgres' ? newSchema(postgresUrl!) : undefined;
  const dbEnv: Record<string, string> = db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: schema!, DATA_DIR: dataDir } : { DATA_DIR: dataDir };
  let server: Server | undefined;
  let bare: Awaited<ReturnType<typeof startBare>> | undefined;
  try {
    log(`knowledge/${db}: starting server (--role all)`);
    server = await startServer(`knowledge-${db}`, 'all', dbEnv);
    const { tenantId } = await call<{ tenantId: string }>(server.baseUrl, 'POST', '/admin/v1/tenants', { body: { name: 'Bench Knowledge Hotel' } });
    const { key } = await call<{ key: string }>(server.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'bench', scopes: ['knowledge:read'] } });
    const { propertyId } = await call<{ propertyId: string }>(server.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/properties`, { body: { name: 'Beach' } });
    const seedStart = Date.now();
    if (db === 'postgres') {
      await withPg(postgresUrl!, async (client) => {
        await client.query(`SET search_path TO ${schema}, public`);
        await seed((sql, params) => client.query(sql, params), tenantId, propertyId);
      });
    } else {
      // PGlite allows one process at a time: stop the server, write through PGlite here, start it again.
      await stopChild(server.child);
      const lite = await openDb({ dataDir });
      try {
        await seed((sql, params) => lite.query(sql, params), tenantId, propertyId);
      } finally {
        await lite.close();
      }
      server = await startServer(`knowledge2-${db}`, 'all', dbEnv);
    }
    const seedSeconds = round((Date.now() - seedStart) / 1000, 1);
    log(`knowledge/${db}: seeded ${fmt(SOURCES)} sources in ${seedSeconds} s`);

    const headers = { authorization: `Bearer ${key}` };
    const first = `${server.baseUrl}/m2m/v1/knowledge/items?limit=200`;
    const sample = await fetch(first, { headers });
    const body = await sample.text();
    if (!sample.ok) throw new Error(`items answered ${sample.status}: ${body.slice(0, 300)}`);
    let page = JSON.parse(body) as { items: unknown[]; nextCursor?: string };
    if (page.items.length !== 200 || !page.nextCursor) throw new Error(`expected 200 items and a cursor, got ${page.items.length}`);
    for (let i = 0; i < 49 && page.nextCursor; i += 1) {
      page = (await (await fetch(`${first}&cursor=${encodeURIComponent(page.nextCursor)}`, { headers })).json()) as typeof page;
    }
    const deep = `${first}&cursor=${encodeURIComponent(page.nextCursor!)}`;
    log(`knowledge/${db}: first page ${fmt(Buffer.byteLength(body))} bytes; measuring`);
    const loads = [
      await measure('limit=200, first page, 32 conns', first, 32, timing, headers),
      await measure('limit=200, first page, 1 conn', first, 1, timing, headers),
      await measure('limit=200, page 51 (cursor), 32 conns', deep, 32, timing, headers),
      await measure('limit=200, query=pool&status=active, 32 conns', `${first}&query=pool&status=active`, 32, timing, headers),
    ];

    log(`knowledge/${db}: ingesting a 5 MB text file source`);
    const ingestion = await ingest5mb(server.baseUrl, key, tenantId);
    log(`  ${fmt(ingestion.tokens)} tokens in ${ingestion.chunks} chunks, ${ingestion.seconds} s: ${fmt(ingestion.tokensPerSec)} tokens/s`);
    await stopChild(server.child);
    server = undefined;

    bare = await startBare(`knowledge-bare-${db}`, body, sample.headers.get('content-type') ?? 'application/json');
    const bareLoad = await measure('bare node:http, same bytes, 32 conns', `${bare.base}/raw`, 32, timing);

    const text = syntheticText(5 * 1024 * 1024);
    countTokens('warm up the tokenizer');
    const t0 = performance.now();
    const chunks = await chunkText(text);
    const chunkerTokensPerSec = round(chunks.reduce((sum, c) => sum + c.tokens, 0) / ((performance.now() - t0) / 1000));
    return {
      db,
      sources: SOURCES,
      seedSeconds,
      responseBytes: Buffer.byteLength(body),
      loads,
      bare: bareLoad,
      ratioVsBare: round(loads[0].rps / bareLoad.rps, 3),
      ingestion,
      chunkerTokensPerSec,
    };
  } finally {
    await stopChild(server?.child);
    await stopChild(bare?.child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export function printKnowledge(results: KnowledgeResult[]): void {
  const rows: string[][] = [];
  for (const r of results) {
    for (const load of [...r.loads, r.bare]) {
      rows.push([dbLabel(r.db), load.what, fmt(load.rps), `${load.p50Ms} ms`, `${load.p99Ms} ms`, fmt(load.non2xx + load.errors), load === r.loads[0] ? `${fmt(r.ratioVsBare, 3)}×` : '']);
    }
  }
  printTable(`Knowledge — GET /m2m/v1/knowledge/items?limit=200, tenant with ${fmt(SOURCES)} sources (first page ${results.map((r) => `${fmt(r.responseBytes)} B`).join(', ')})`, ['database', 'target', 'req/s', 'p50', 'p99', 'non-2xx/errors', 'real/bare'], rows);
  printTable('Knowledge — ingestion of a 5 MB text (extract, chunk ~500 tokens, count with cl100k_base, store)', ['database', 'tokens', 'chunks', 'seconds', 'tokens/s (job, end to end)', 'tokens/s (chunker alone)'], results.map((r) => [
    dbLabel(r.db), fmt(r.ingestion.tokens), fmt(r.ingestion.chunks), fmt(r.ingestion.seconds, 2), fmt(r.ingestion.tokensPerSec), fmt(r.chunkerTokensPerSec),
  ]));
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const quick = argv.includes('--quick');
  const dbArg = argv.find((a) => a.startsWith('--db='))?.slice(5) ?? (argv.includes('--db') ? argv[argv.indexOf('--db') + 1] : 'both');
  const postgresUrl = dbArg === 'pglite' ? undefined : await detectPostgres();
  const dbs: DbKind[] = dbArg === 'pglite' ? ['pglite'] : dbArg === 'postgres' ? ['postgres'] : postgresUrl ? ['pglite', 'postgres'] : ['pglite'];
  const timing = quick ? { warmupS: 1, measureS: 3 } : { warmupS: 2, measureS: 10 };
  const results: KnowledgeResult[] = [];
  try {
    for (const db of dbs) results.push(await runKnowledge(db, postgresUrl, timing));
  } finally {
    await stopAllChildren();
    await dropSchemas();
  }
  printKnowledge(results);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    () => process.exit(0),
    async (error: unknown) => {
      console.error('knowledge bench failed:', error instanceof Error ? error.message : error);
      await stopAllChildren();
      await dropSchemas();
      process.exit(1);
    },
  );
}
