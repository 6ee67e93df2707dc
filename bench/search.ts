/**
 * Knowledge search scenario (issue 44).
 * (a) Quality: the fixture hotel website (test/fixtures/hotel-site, English and Spanish) crawled by the real
 *     crawler into a fresh server, then every guest question of questions.json asked keyword-only, vector-only
 *     and hybrid: recall@1, recall@5 and MRR of the page that answers it.
 * (b) Load (PostgreSQL only): one tenant with 100,000 chunks among 1,000,000 (seeded by SQL, with vectors);
 *     the hybrid search at 16 connections against a bare `ORDER BY ts_rank … LIMIT 5` over the same tenant's
 *     chunks (the two alternate in rounds), and how long the tenant's chunks take to index.
 *   node --import tsx bench/search.ts [--db pglite|postgres] [--quick]
 * `runSearch()` is what `npm run bench -- --only search` calls.
 */
import pino from 'pino';
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../src/config.js';
import { systemCtx } from '../src/context.js';
import { openDb, type Db } from '../src/db/driver.js';
import { migrate } from '../src/db/migrate.js';
import { createRuntime, type Runtime } from '../src/runtime.js';
import { LocalEmbedder } from '../src/knowledge/crawler/embedder.js';
import { LargeTenants } from '../src/knowledge/search/large-tenants.js';
import { searchKnowledge, type SearchMode } from '../src/knowledge/search/search.js';
import { HOTEL_PAGES, hotelQuestions, startHotelSite } from '../test/fixtures/hotel-site/site.js';
import { CpuMeter, ROOT, fmt, log, printTable, round, sleep, type DbKind } from './lib.js';
import { detectPostgres, dropSchemas, newSchema, trackChild } from './procs.js';

export interface QualityRow {
  mode: SearchMode;
  questions: number;
  recallAt1: number;
  recallAt5: number;
  mrr: number;
  /** The questions whose page was not in the top 5. */
  misses: string[];
  /**
   * The same on the two halves of the question list (even and odd positions): a rule or weight tuned on one half
   * is judged on the other.
   */
  halves: Array<{ recallAt5: number; mrr: number }>;
}

export interface SearchLoad {
  what: string;
  connections: number;
  qps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU over the run, % of one core: this process (the bench), PostgreSQL, everything else on the machine. */
  cpuPct: Record<string, number>;
}

export interface SearchResult {
  db: DbKind;
  pages: number;
  chunks: number;
  quality: QualityRow[];
  load?: {
    tenantChunks: number;
    totalChunks: number;
    /** Inserting the tenant's chunks, their generated tsvector and sketches included. */
    tenantInsertSeconds: number;
    /** CREATE INDEX of the GIN full-text index over the tenant's chunks. */
    tenantIndexSeconds: number;
    hybrid: SearchLoad;
    bare: SearchLoad;
    /** Hybrid ÷ bare throughput over all rounds. */
    ratio: number;
    /** The same ratio, round by round. */
    rounds: number[];
  };
}

const ADMIN_TOKEN = 'bench-search-admin';
/** Rounds of the load phase: each measures a share of the time of the hybrid search and of the bare query. */
const ROUNDS = 6;

async function inject<T>(runtime: Runtime, method: string, url: string, token: string, body?: unknown): Promise<T> {
  const res = await runtime.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${token}` }, ...(body === undefined ? {} : { payload: body as Record<string, unknown> }) });
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
  return res.json() as T;
}

/** Crawls the hotel site into a fresh server and scores the three modes on every question. */
async function quality(db: DbKind, postgresUrl: string | undefined): Promise<Pick<SearchResult, 'pages' | 'chunks' | 'quality'>> {
  const site = await startHotelSite();
  const database = db === 'postgres' && postgresUrl ? { DATABASE_URL: postgresUrl, DATABASE_SCHEMA: newSchema(postgresUrl) } : { DATA_DIR: 'memory://' };
  const config = loadConfig({ ADMIN_TOKEN, UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', JOB_POLL_INTERVAL_MS: '50', RATE_LIMIT_RPS: '100000', RATE_LIMIT_BURST: '100000', ...database }, []);
  const runtime = await createRuntime(config, { logger: pino({ level: 'silent' }) });
  await runtime.startWorkers();
  try {
    const tenant = await inject<{ tenantId: string }>(runtime, 'POST', '/admin/v1/tenants', ADMIN_TOKEN, { name: 'Hotel Marea Alta' });
    const { key } = await inject<{ key: string }>(runtime, 'POST', `/admin/v1/tenants/${tenant.tenantId}/api-keys`, ADMIN_TOKEN, { name: 'bench', scopes: ['knowledge:write'] });
    const started = await inject<{ job: { jobId: string } }>(runtime, 'POST', '/m2m/v1/knowledge/url/crawl', key, { rootUrl: `${site.origin}/en/`, crawlDepth: 3, maxPages: 100 });
    let job: { status: string; chunks?: number; snapshotPages?: number } = { status: 'queued' };
    for (const deadline = Date.now() + 120_000; job.status !== 'completed' && job.status !== 'failed'; await sleep(100)) {
      if (Date.now() > deadline) throw new Error('the hotel site crawl did not finish within 120 s');
      job = (await inject<{ job: typeof job }>(runtime, 'GET', `/m2m/v1/knowledge/url/crawl/${started.job.jobId}`, key)).job;
    }
    if (job.status !== 'completed') throw new Error(`the hotel site crawl failed: ${JSON.stringify(job)}`);
    log(`  crawled ${job.snapshotPages} pages of ${HOTEL_PAGES.length}, ${job.chunks} chunks`);
    const deps = { db: runtime.services.db, embedder: new LocalEmbedder() };
    const ctx = systemCtx(tenant.tenantId);
    const questions = hotelQuestions();
    const rows: QualityRow[] = [];
    for (const mode of ['keyword', 'vector', 'hybrid'] as const) {
      let at1 = 0;
      let at5 = 0;
      let reciprocal = 0;
      const misses: string[] = [];
      const halves = [0, 1].map(() => ({ n: 0, at5: 0, reciprocal: 0 }));
      for (const [i, q] of questions.entries()) {
        const { results } = await searchKnowledge(deps, ctx, { query: q.question, limit: 5 }, mode);
        const found = results.findIndex((r) => r.url !== undefined && new URL(r.url).pathname === q.page);
        const half = halves[i % 2]!;
        half.n += 1;
        if (found >= 0) {
          // Tie-aware: a page tied on score with others is at each of their positions with equal chance (the order
          // among them is the page ids', random per crawl), so the figures do not move from one crawl to the next.
          const tied = results.flatMap((r, position) => (r.score === results[found]!.score ? [position + 1] : []));
          at1 += tied.includes(1) ? 1 / tied.length : 0;
          const rr = tied.reduce((sum, rank) => sum + 1 / rank, 0) / tied.length;
          at5 += 1;
          reciprocal += rr;
          half.at5 += 1;
          half.reciprocal += rr;
        } else misses.push(q.question);
      }
      const n = questions.length;
      rows.push({
        mode,
        questions: n,
        recallAt1: round(at1 / n, 3),
        recallAt5: round(at5 / n, 3),
        mrr: round(reciprocal / n, 3),
        misses,
        halves: halves.map((h) => ({ recallAt5: round(h.at5 / h.n, 3), mrr: round(h.reciprocal / h.n, 3) })),
      });
    }
    return { pages: job.snapshotPages ?? 0, chunks: job.chunks ?? 0, quality: rows };
  } finally {
    await runtime.close();
    await site.close();
  }
}

const HOTEL_WORDS = ('breakfast terrace pool suite ocean view booking reception parking garden spa dinner menu wine tour beach towel ' +
  'checkout family room balcony quiet floor elevator airport shuttle transfer price season offer discount guest review ' +
  'lobby bar coffee fitness sauna massage yoga kids club pets dog allowed wifi desk concierge luggage storage laundry iron safe ' +
  'time served morning evening car bring late early children hotel open night').split(' ');
const STOP_WORDS = 'the and of to in for with our is you are can at on from'.split(' ');

/**
 * The seeded chunks' vocabulary, most frequent first: English stop words (so chunks are detected as English),
 * then 6,000 made-up words with the hotel's words spread among them; words are drawn with a Zipf-like law
 * (index = vocabulary size ^ random), so a hotel word is in a few percent of the chunks, as on a real site.
 */
export function vocabulary(): string[] {
  let state = 7;
  const random = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
  const syllables = ['ba', 'ri', 'to', 'mel', 'san', 'qua', 'ver', 'lo', 'den', 'ix', 'po', 'rha', 'tur', 'ni', 'gal', 'esh', 'mo', 'cu', 'fra', 'zin'];
  const words = Array.from({ length: 6000 }, (_, i) => {
    let word = '';
    for (let n = 2 + (i % 3); n > 0; n -= 1) word += syllables[Math.floor(random() * syllables.length)];
    return word;
  });
  HOTEL_WORDS.forEach((word, i) => words.splice(Math.floor(20 * 100 ** (i / HOTEL_WORDS.length)), 0, word));
  return [...STOP_WORDS, ...words];
}

const LOAD_QUERIES = [
  'What time is breakfast served?',
  'is there parking for my car',
  'can I bring my dog',
  'airport shuttle price',
  '¿A qué hora es el desayuno?',
  'late checkout',
  'sauna and massage in the spa',
  'wifi in the room',
  '¿Hay piscina para niños?',
  'luggage storage after checkout',
];

/**
 * Chunk text by SQL: 60–120 words drawn from `vocabulary()`. Vectors: 256 random components (the local
 * embedder's size), so the sketches are as dense as a long chunk's.
 */
const SEED_SOURCES = `
  INSERT INTO knowledge_sources (id, tenant_id, kind, title, active, chunk_count, tokens, created_at, updated_at)
  SELECT $1 || '_' || i, $2, 'text', 'Seeded ' || i, true, 10, 1000, now(), now() FROM generate_series(1, $3::int) AS i`;
const SEED_CHUNKS = `
  INSERT INTO knowledge_chunks (source_id, seq, tenant_id, text, tokens, embedding, embedding_model)
  SELECT $1 || '_' || (1 + (i - 1) / 10), (i - 1) % 10, $2,
         (SELECT string_agg(($3::text[])[floor(power(array_length($3::text[], 1), random()))::int], ' ') FROM generate_series(1, 60 + (i % 60)) AS w WHERE i > 0),
         100,
         (SELECT array_agg((random() - 0.5)::real) FROM generate_series(1, 256) AS d WHERE i > 0),
         'local-hash-256'
  FROM generate_series($4::int, $5::int) AS i`;

export async function seedTenant(db: Db, tenantId: string, chunks: number, words: string[]): Promise<void> {
  await db.query(`INSERT INTO tenants (id, name, created_at, updated_at) VALUES ($1, $1, now(), now()) ON CONFLICT DO NOTHING`, [tenantId]);
  const prefix = `ks_${tenantId}`;
  await db.query(SEED_SOURCES, [prefix, tenantId, Math.ceil(chunks / 10)]);
  for (let start = 1; start <= chunks; start += 20_000) {
    await db.query(SEED_CHUNKS, [prefix, tenantId, words, start, Math.min(chunks, start + 19_999)]);
  }
}

const cpu = (pct: Record<string, number>) => `${fmt(pct.bench)} / ${fmt(pct.postgres)} / ${fmt(pct.other)}`;

interface Window {
  latencies: number[];
  seconds: number;
  cpuPct: Record<string, number>;
}

/** `connections` loops running `run` for `seconds`; the latency of every call. */
async function drive(connections: number, seconds: number, run: (i: number) => Promise<unknown>): Promise<Window> {
  const latencies: number[] = [];
  const meter = new CpuMeter({ bench: process.pid }, true);
  const started = performance.now();
  const end = Date.now() + seconds * 1000;
  let counter = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < end) {
        const t = performance.now();
        await run(counter++);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { latencies, seconds: (performance.now() - started) / 1000, cpuPct: meter.stop() };
}

/** One query's windows together: throughput over their time, percentiles over all their calls. */
function summarize(what: string, connections: number, windows: Window[]): SearchLoad {
  const latencies = windows.flatMap((w) => w.latencies).sort((a, b) => a - b);
  const seconds = windows.reduce((sum, w) => sum + w.seconds, 0);
  const at = (p: number) => round(latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] ?? Number.NaN, 1);
  const cpuPct: Record<string, number> = {};
  for (const key of Object.keys(windows[0]?.cpuPct ?? {})) cpuPct[key] = round(windows.reduce((sum, w) => sum + (w.cpuPct[key] ?? 0) * w.seconds, 0) / seconds);
  return { what, connections, qps: round(latencies.length / seconds), p50Ms: at(50), p99Ms: at(99), cpuPct };
}

async function load(postgresUrl: string, quick: boolean): Promise<NonNullable<SearchResult['load']>> {
  const tenantChunks = quick ? 20_000 : 100_000;
  const totalChunks = quick ? 100_000 : 1_000_000;
  const schema = newSchema(postgresUrl);
  const db = await openDb({ databaseUrl: postgresUrl, schema, dataDir: '', poolSize: 17 });
  try {
    await migrate(db);
    await db.query('DROP INDEX knowledge_chunks_search');
    let t = performance.now();
    const words = vocabulary();
    await seedTenant(db, 'tn_search', tenantChunks, words);
    const tenantInsertSeconds = round((performance.now() - t) / 1000, 1);
    t = performance.now();
    // As migration 0038 defines it: the tenant and the chunk's words in one GIN index.
    await db.query('CREATE INDEX knowledge_chunks_search ON knowledge_chunks USING gin (tenant_id, search_vector)');
    const tenantIndexSeconds = round((performance.now() - t) / 1000, 1);
    log(`  ${tenantChunks} chunks: inserted in ${tenantInsertSeconds} s, full-text index built in ${tenantIndexSeconds} s`);
    const others = 9;
    for (let i = 1; i <= others; i += 1) await seedTenant(db, `tn_other${i}`, Math.floor((totalChunks - tenantChunks) / others), words);
    // The steady state autovacuum keeps: statistics, and the GIN index's pending list (rows inserted after it was
    // built wait there, scanned on every search) merged into the index.
    await db.query('VACUUM ANALYZE knowledge_chunks');
    await db.query('ANALYZE');
    log(`  seeded ${totalChunks} chunks across ${others + 1} tenants`);
    // As KnowledgeService searches: with the tenants lately found large remembered across searches.
    const deps = { db, embedder: new LocalEmbedder(), largeTenants: new LargeTenants() };
    const ctx = systemCtx('tn_search');
    const bare = `SELECT c.source_id, c.seq FROM knowledge_chunks c
      WHERE c.tenant_id = $1 AND c.search_vector @@ websearch_to_tsquery('english', $2)
      ORDER BY ts_rank(c.search_vector, websearch_to_tsquery('english', $2)) DESC LIMIT 5`;
    const seconds = quick ? 12 : 36;
    const hybridRun = (i: number) => searchKnowledge(deps, ctx, { query: LOAD_QUERIES[i % LOAD_QUERIES.length], limit: 5 });
    const bareRun = (i: number) => db.query(bare, ['tn_search', LOAD_QUERIES[i % LOAD_QUERIES.length]]);
    await drive(16, 3, hybridRun);
    await drive(16, 3, bareRun);
    // The two alternate in rounds (hybrid first in one, bare first in the next), so that a slow spell of the shared
    // machine falls on both.
    const hybridWindows: Window[] = [];
    const bareWindows: Window[] = [];
    const rounds: number[] = [];
    for (let i = 0; i < ROUNDS; i += 1) {
      const hybridFirst = i % 2 === 0;
      const first = await drive(16, seconds / ROUNDS, hybridFirst ? hybridRun : bareRun);
      const second = await drive(16, seconds / ROUNDS, hybridFirst ? bareRun : hybridRun);
      const [h, b] = hybridFirst ? [first, second] : [second, first];
      hybridWindows.push(h);
      bareWindows.push(b);
      rounds.push(round(h.latencies.length / h.seconds / (b.latencies.length / b.seconds), 2));
      log(`  round ${i + 1}: hybrid ${fmt(h.latencies.length / h.seconds)} q/s, bare ${fmt(b.latencies.length / b.seconds)} q/s (${fmt(rounds[i] ?? 0, 2)}×)`);
    }
    const hybrid = summarize('hybrid search', 16, hybridWindows);
    const bareLoad = summarize('bare ORDER BY ts_rank LIMIT 5', 16, bareWindows);
    return { tenantChunks, totalChunks, tenantInsertSeconds, tenantIndexSeconds, hybrid, bare: bareLoad, ratio: round(hybrid.qps / bareLoad.qps, 2), rounds };
  } finally {
    await db.close();
  }
}

export async function runSearch(db: DbKind, postgresUrl: string | undefined, quick: boolean): Promise<SearchResult> {
  log(`search on ${db}: quality on the hotel site`);
  const result: SearchResult = { db, ...(await quality(db, postgresUrl)) };
  if (db === 'postgres' && postgresUrl) {
    log('search on postgres: load');
    result.load = await loadInChild(postgresUrl, quick);
  }
  return result;
}

/**
 * The load phase in a process of its own, as a server process serves searches: after the quality phase's runtimes,
 * this process spent far longer collecting garbage per search, a cost that fell on the hybrid side only
 * (bench/README.md).
 */
async function loadInChild(postgresUrl: string, quick: boolean): Promise<NonNullable<SearchResult['load']>> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/search.ts', '--load-only', ...(quick ? ['--quick'] : [])], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: postgresUrl },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  trackChild(child);
  return new Promise((resolve, reject) => {
    child.once('message', (message: NonNullable<SearchResult['load']>) => resolve(message));
    child.once('exit', (code) => reject(new Error(`the search load process exited (${code}) without a result`)));
  });
}

/** Issue 44's targets against one run's figures. */
export function searchTargets(r: SearchResult): Array<[string, boolean]> {
  const by = (mode: SearchMode) => r.quality.find((q) => q.mode === mode);
  const [hybrid, keyword, vector] = [by('hybrid'), by('keyword'), by('vector')];
  const out: Array<[string, boolean]> = [];
  if (hybrid && keyword && vector) {
    out.push([`hybrid recall@5 ${hybrid.recallAt5} >= 0.9`, hybrid.recallAt5 >= 0.9]);
    out.push([`hybrid recall@5 ${hybrid.recallAt5} > keyword ${keyword.recallAt5} and vector ${vector.recallAt5}`, hybrid.recallAt5 > keyword.recallAt5 && hybrid.recallAt5 > vector.recallAt5]);
    out.push([`hybrid MRR ${hybrid.mrr} > keyword ${keyword.mrr} and vector ${vector.mrr}`, hybrid.mrr > keyword.mrr && hybrid.mrr > vector.mrr]);
  }
  if (r.load) {
    out.push([`p99 ${r.load.hybrid.p99Ms} ms < 50 ms at ${r.load.hybrid.connections} connections`, r.load.hybrid.p99Ms < 50]);
    out.push([`throughput ${r.load.ratio} >= 0.5 x the bare ts_rank query`, r.load.ratio >= 0.5]);
    out.push([`index build ${r.load.tenantIndexSeconds} s < 60 s for ${r.load.tenantChunks} chunks`, r.load.tenantIndexSeconds < 60]);
  }
  return out;
}

export function printSearch(results: SearchResult[]): void {
  for (const r of results) {
    printTable(
      `Knowledge search quality, ${r.db} (${r.pages} pages, ${r.chunks} chunks, ${r.quality[0]?.questions ?? 0} questions)`,
      ['mode', 'recall@1', 'recall@5', 'MRR', 'even half r@5 / MRR', 'odd half r@5 / MRR'],
      r.quality.map((q) => [q.mode, fmt(q.recallAt1, 3), fmt(q.recallAt5, 3), fmt(q.mrr, 3), ...q.halves.map((h) => `${fmt(h.recallAt5, 3)} / ${fmt(h.mrr, 3)}`)]),
    );
    const hybrid = r.quality.find((q) => q.mode === 'hybrid');
    if (hybrid && hybrid.misses.length > 0) console.log(`  hybrid misses: ${hybrid.misses.join(' | ')}`);
    if (r.load) {
      const l = r.load;
      printTable(
        `Knowledge search load, postgres (${l.tenantChunks} chunks in the tenant, ${l.totalChunks} in all; insert ${l.tenantInsertSeconds} s, index ${l.tenantIndexSeconds} s)`,
        ['query', 'connections', 'q/s', 'p50 ms', 'p99 ms', 'CPU % bench/pg/other'],
        [l.hybrid, l.bare].map((x) => [x.what, String(x.connections), fmt(x.qps), fmt(x.p50Ms, 1), fmt(x.p99Ms, 1), cpu(x.cpuPct)]),
      );
      console.log(`  hybrid / bare throughput: ${l.ratio} (rounds ${l.rounds.map((x) => fmt(x, 2)).join(', ')})`);
    }
    for (const [target, pass] of searchTargets(r)) console.log(`  ${pass ? 'PASS' : 'FAIL'}  ${target}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argv = process.argv.slice(2);
  const dbArg = argv.includes('--db') ? argv[argv.indexOf('--db') + 1] : undefined;
  const quick = argv.includes('--quick');
  const postgresUrl = await detectPostgres();
  if (argv.includes('--load-only')) {
    // The load child of runSearch (loadInChild): its result goes back over IPC.
    const send = process.send?.bind(process);
    if (!postgresUrl || !send) throw new Error('--load-only runs as the search load child of bench/search.ts, on PostgreSQL');
    try {
      const result = await load(postgresUrl, quick);
      await new Promise<void>((resolve, reject) => send(result, undefined, {}, (error) => (error ? reject(error) : resolve())));
    } finally {
      await dropSchemas();
    }
    process.exit(0);
  }
  const kind: DbKind = dbArg === 'pglite' || (!dbArg && !postgresUrl) ? 'pglite' : 'postgres';
  try {
    printSearch([await runSearch(kind, postgresUrl, quick)]);
  } finally {
    await dropSchemas();
  }
}
