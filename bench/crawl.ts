/**
 * Website crawl benchmark (issue 9): a generated 500-page site on 127.0.0.1 (pages of about 6 KB with 5–8
 * links, a fixed 20 ms response latency) crawled by our crawler through the real job (fetch, extract,
 * chunk, store, embed, switch generations), by our crawler alone (fetch and extract, nothing stored: the
 * part that compares with Crawlee), and by Crawlee's CheerioCrawler at the same concurrency (default pool,
 * and its pool polled every 10 ms). Each runs in its own child process so peak RSS is its own; the site
 * runs in this process. The ratio is taken against Crawlee's faster run.
 *
 *   node --import tsx bench/crawl.ts [--pages 500] [--concurrency 10] [--latency 20] [--json out.json]
 *
 * DATABASE_URL set: our crawler stores into a fresh schema there; unset: in-memory PGlite.
 * `runCrawl()` is what `npm run bench` calls (`--only crawl`); it returns the figures instead of printing them.
 */
import http from 'node:http';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AddressInfo } from 'node:net';
import { systemCtx } from '../src/context.js';

type Kind = 'ours' | 'ours-crawler' | 'crawlee' | 'crawlee-tuned';

export interface Result {
  crawler: string;
  pages: number;
  seconds: number;
  pagesPerSecond: number;
  peakRssMb: number;
  note?: string;
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const WORDS = ('breakfast terrace pool suite ocean view booking reception parking garden spa dinner menu wine tour beach towel ' +
  'checkin checkout family room balcony quiet floor elevator airport shuttle transfer price season offer discount guest review ' +
  'lobby bar coffee fitness sauna massage yoga kids club pets allowed wifi desk concierge luggage storage laundry iron safe').split(' ');

function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Page i: a binary-tree link to 2i+1 and 2i+2 (every page within 9 hops), plus random links up to 5–8. */
function buildSite(pages: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < pages; i += 1) {
    const random = rng(i + 1);
    const links = new Set<number>([2 * i + 1, 2 * i + 2].filter((n) => n < pages));
    const want = 5 + Math.floor(random() * 4);
    while (links.size < want) links.add(Math.floor(random() * pages));
    const paragraphs: string[] = [];
    let size = 0;
    while (size < 5200) {
      const words = Array.from({ length: 40 }, () => WORDS[Math.floor(random() * WORDS.length)]);
      const text = `Page ${i}: ${words.join(' ')}.`;
      paragraphs.push(`<p>${text}</p>`);
      size += text.length + 7;
    }
    const anchors = [...links].map((n) => `<li><a href="/page/${n}">Page ${n}</a></li>`).join('');
    out.push(`<!doctype html><html><head><title>Page ${i}</title></head><body><header><nav><a href="/">Home</a></nav></header>` +
      `<main><h1>Page ${i}</h1>${paragraphs.join('')}<ul>${anchors}</ul></main><footer>Footer</footer></body></html>`);
  }
  return out;
}

async function serve(pages: string[], latencyMs: number): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const match = /^\/page\/(\d+)$/.exec(req.url ?? '');
    const index = req.url === '/' ? 0 : match ? Number(match[1]) : -1;
    setTimeout(() => {
      if (index < 0 || index >= pages.length) return void res.writeHead(404).end('not found');
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(pages[index]);
    }, latencyMs);
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

function cpuSeconds(since: NodeJS.CpuUsage): string {
  const used = process.cpuUsage(since);
  return ((used.user + used.system) / 1e6).toFixed(1);
}

function peakRssMb(): number {
  return Math.round(process.resourceUsage().maxRSS / 1024);
}

/** Our crawler, through the real runtime: admin creates the website, the worker runs knowledge.crawl. */
async function runOurs(root: string, pages: number, concurrency: number): Promise<Result> {
  const { default: pino } = await import('pino');
  const { loadConfig } = await import('../src/config.js');
  const { createRuntime } = await import('../src/runtime.js');
  const schema = process.env.DATABASE_URL ? `bench_crawl_${process.pid}` : undefined;
  const config = loadConfig({
    ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL, DATABASE_SCHEMA: schema } : { DATA_DIR: 'memory://' }),
    ADMIN_TOKEN: 'bench',
    UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true',
    CRAWL_CONCURRENCY_PER_HOST: String(concurrency),
    JOB_POLL_INTERVAL_MS: '20',
  }, []);
  const runtime = await createRuntime(config, { logger: pino({ level: 'silent' }) });
  await runtime.startWorkers();
  const baseline = Math.round(process.memoryUsage().rss / 1048576);
  const cpu0 = process.cpuUsage();
  const admin = async (url: string, body: unknown) => {
    const res = await runtime.app.inject({ method: 'POST', url: `/admin/v1${url}`, headers: { authorization: 'Bearer bench' }, payload: body as object });
    if (res.statusCode >= 300) throw new Error(res.body);
    return res.json();
  };
  const tenant = await admin('/tenants', { name: 'Bench' });
  const started = performance.now();
  const website = await admin(`/tenants/${tenant.tenantId}/knowledge/websites`, { rootUrl: root, crawlDepth: 10, maxPages: Math.min(pages, 500) });
  let job;
  for (;;) {
    job = (await runtime.services.crawls.getJob(systemCtx(tenant.tenantId), { jobId: website.latestJob.jobId })).job;
    if (job.status === 'completed' || job.status === 'failed') break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const seconds = (performance.now() - started) / 1000;
  if (job.status !== 'completed') throw new Error(`crawl failed: ${JSON.stringify(job.error)}`);
  const stored = job.snapshotPages ?? 0;
  await runtime.close(1000);
  if (schema) {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  }
  return {
    crawler: `ours (fetch+extract+chunk+store+embed, ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`,
    pages: stored,
    seconds,
    pagesPerSecond: stored / seconds,
    peakRssMb: peakRssMb(),
    note: `${job.chunks} chunks, ${job.progress.chunksEmbedded} embedded; RSS ${baseline} MB before the crawl; CPU ${cpuSeconds(cpu0)} s`,
  };
}

/** Our crawler alone (robots, sitemap, fetch, extract; pages counted, not stored): the part Crawlee is compared with. */
async function runOursCrawlerOnly(root: string, pages: number, concurrency: number): Promise<Result> {
  const { SiteCrawler } = await import('../src/knowledge/crawler/crawler.js');
  const { CrawlFetcher } = await import('../src/knowledge/crawler/fetcher.js');
  const fetcher = new CrawlFetcher({ allowPrivate: true, timeoutMs: 15_000, maxBytes: 2 * 1024 * 1024, userAgent: 'm2m-knowledge-crawler/1.0', connections: concurrency });
  const crawler = new SiteCrawler(
    { root: new URL(root), crawlDepth: 10, maxPages: Math.min(pages, 500), rules: [], defaultEnabled: true },
    { fetcher, allowPrivate: true, agentToken: 'm2m-knowledge-crawler', concurrencyPerHost: concurrency, maxDelayMs: 10_000, maxBytes: 2 * 1024 * 1024, deadlineMs: 3_600_000 },
  );
  let chars = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const stored = await crawler.run(async (page) => void (chars += page.text.length));
  const seconds = (performance.now() - started) / 1000;
  await fetcher.close();
  return { crawler: 'ours, crawler only (fetch+extract, nothing stored)', pages: stored, seconds, pagesPerSecond: stored / seconds, peakRssMb: peakRssMb(), note: `${chars} characters; CPU ${cpuSeconds(cpu0)} s` };
}

/** Crawlee's CheerioCrawler: fetch, parse with cheerio, take the main text, enqueue same-host links. */
async function runCrawlee(root: string, pages: number, concurrency: number, tuned: boolean): Promise<Result> {
  const storage = mkdtempSync(path.join(tmpdir(), 'crawlee-bench-'));
  process.env.CRAWLEE_STORAGE_DIR = storage;
  try {
    const { CheerioCrawler, Configuration, log, LogLevel } = await import('@crawlee/cheerio');
    log.setLevel(LogLevel.OFF);
    let count = 0;
    let chars = 0;
    let lastAt = 0;
    const crawler = new CheerioCrawler(
      {
        minConcurrency: concurrency,
        maxConcurrency: concurrency,
        maxRequestsPerCrawl: pages,
        maxRequestRetries: 0,
        // Tuned: the pool looks for ready requests every 10 ms instead of every 500 ms (its default), which
        // otherwise leaves slots idle whenever the queue head is momentarily empty.
        ...(tuned ? { autoscaledPoolOptions: { maybeRunIntervalSecs: 0.01 } } : {}),
        async requestHandler({ $, enqueueLinks }) {
          count += 1;
          if (count === pages) lastAt = performance.now();
          chars += $('main').text().length;
          await enqueueLinks({ strategy: 'same-hostname' });
        },
      },
      new Configuration({ persistStorage: false, purgeOnStart: true }),
    );
    const cpu0 = process.cpuUsage();
    const started = performance.now();
    await crawler.run([root]);
    const seconds = (performance.now() - started) / 1000;
    return { crawler: `Crawlee CheerioCrawler (fetch+parse+text${tuned ? ', pool polled every 10 ms' : ''})`, pages: count, seconds, pagesPerSecond: count / seconds, peakRssMb: peakRssMb(), note: `${chars} characters; CPU ${cpuSeconds(cpu0)} s; last page after ${((lastAt - started) / 1000).toFixed(2)} s` };
  } finally {
    rmSync(storage, { recursive: true, force: true });
  }
}

const running = new Set<ChildProcess>();

/** SIGKILLs the crawler children still running (for the bench's signal handlers). */
export function killCrawlChildren(): void {
  for (const proc of running) proc.kill('SIGKILL');
}

/** A crawler run in its own process; with `databaseUrl` our crawl job stores there (schema bench_crawl_<pid>). */
function child(kind: Kind, root: string, pages: number, concurrency: number, databaseUrl?: string): Promise<Result | { error: string }> {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  delete env.DATABASE_SCHEMA;
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', kind, '--root', root, '--pages', String(pages), '--concurrency', String(concurrency)], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env,
    });
    running.add(proc);
    // Bounded: a crawler that has not finished after 5 minutes is killed and reported as failed.
    const timer = setTimeout(() => proc.kill('SIGKILL'), 300_000);
    let out = '';
    proc.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(proc);
      const line = out.trim().split('\n').filter((l) => l.startsWith('{')).pop();
      const result = line ? (JSON.parse(line) as Result | { error: string }) : { error: `exited with ${code ?? signal}: ${out.slice(-500)}` };
      // The child drops its schema itself; this catches a child that died first.
      if (kind === 'ours' && databaseUrl && proc.pid) void dropSchema(databaseUrl, `bench_crawl_${proc.pid}`).finally(() => resolve(result));
      else resolve(result);
    });
  });
}

async function dropSchema(databaseUrl: string, schema: string): Promise<void> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } catch {
    // best effort
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface CrawlOptions {
  pages?: number;
  concurrency?: number;
  latencyMs?: number;
  /** PostgreSQL URL for our crawl job's storage; undefined: in-memory PGlite. */
  databaseUrl?: string;
  log?: (message: string) => void;
}

export interface CrawlRatio {
  /** ours pages/s ÷ the faster Crawlee configuration's pages/s (goal ≥ 1.5). */
  pagesPerSecond: number;
  /** ours peak RSS ÷ that Crawlee configuration's peak RSS (goal < 1). */
  peakRss: number;
}

export interface CrawlSummary {
  pages: number;
  concurrency: number;
  latencyMs: number;
  averagePageBytes: number;
  database: 'postgres' | 'pglite';
  results: Array<{ kind: Kind } & (Result | { error: string })>;
  /** The faster Crawlee run (the conservative comparison), if any succeeded. */
  crawlee?: Result;
  ratios: { fullJob?: CrawlRatio; crawlerOnly?: CrawlRatio };
}

/** Serves the generated site in this process and runs the four crawlers one after another, each in its own process. */
export async function runCrawl(options: CrawlOptions = {}): Promise<CrawlSummary> {
  const pages = options.pages ?? 500;
  const concurrency = options.concurrency ?? 10;
  const latency = options.latencyMs ?? 20;
  const say = options.log ?? console.log;
  const site = buildSite(pages);
  const average = Math.round(site.reduce((sum, p) => sum + p.length, 0) / site.length);
  const server = await serve(site, latency);
  say(`crawl: site of ${pages} pages of ~${average} bytes, ${latency} ms latency, concurrency ${concurrency}; our job stores into ${options.databaseUrl ? 'PostgreSQL' : 'PGlite'}`);
  const results: CrawlSummary['results'] = [];
  try {
    for (const kind of ['ours', 'ours-crawler', 'crawlee', 'crawlee-tuned'] as const) {
      const r = await child(kind, server.url, pages, concurrency, options.databaseUrl);
      results.push({ kind, ...r });
      say('error' in r ? `  ${kind}: failed: ${r.error}` : `  ${r.crawler}: ${r.pages} pages in ${r.seconds.toFixed(2)} s, ${r.pagesPerSecond.toFixed(1)} pages/s, peak RSS ${r.peakRssMb} MB`);
    }
  } finally {
    await server.close();
  }
  const ok = (kind: Kind) => results.find((r): r is { kind: Kind } & Result => r.kind === kind && !('error' in r));
  const crawlees = [ok('crawlee'), ok('crawlee-tuned')].filter((r): r is { kind: Kind } & Result => r !== undefined);
  // Against the faster Crawlee configuration: the conservative ratio.
  const crawlee = crawlees.length > 0 ? crawlees.reduce((a, b) => (b.pagesPerSecond > a.pagesPerSecond ? b : a)) : undefined;
  const ratio = (r: Result | undefined): CrawlRatio | undefined =>
    r && crawlee ? { pagesPerSecond: r.pagesPerSecond / crawlee.pagesPerSecond, peakRss: r.peakRssMb / crawlee.peakRssMb } : undefined;
  return {
    pages,
    concurrency,
    latencyMs: latency,
    averagePageBytes: average,
    database: options.databaseUrl ? 'postgres' : 'pglite',
    results,
    crawlee,
    ratios: { fullJob: ratio(ok('ours')), crawlerOnly: ratio(ok('ours-crawler')) },
  };
}

export function printCrawl(summary: CrawlSummary): void {
  console.log(`\nCrawl — ${summary.pages}-page generated site (~${summary.averagePageBytes} B a page, ${summary.latencyMs} ms latency), concurrency ${summary.concurrency}; each crawler in its own process`);
  for (const r of summary.results) {
    if ('error' in r) console.log(`  ${r.kind}: failed: ${r.error}`);
    else console.log(`  ${r.crawler.padEnd(64)} ${String(r.pages).padStart(4)} pages  ${r.seconds.toFixed(2)} s  ${r.pagesPerSecond.toFixed(1).padStart(6)} pages/s  peak RSS ${r.peakRssMb} MB  (${r.note})`);
  }
  for (const [label, ratio] of [['full job', summary.ratios.fullJob], ['crawler only', summary.ratios.crawlerOnly]] as const) {
    if (!ratio) continue;
    console.log(`ratio ours (${label}) / Crawlee: ${ratio.pagesPerSecond.toFixed(2)}x pages/s (goal >= 1.5x), ${ratio.peakRss.toFixed(2)}x peak RSS (goal < 1)`);
  }
}

async function main(): Promise<void> {
  const childIndex = process.argv.indexOf('--child');
  const pages = arg('pages', 500);
  const concurrency = arg('concurrency', 10);
  if (childIndex >= 0) {
    const kind = process.argv[childIndex + 1];
    const root = process.argv[process.argv.indexOf('--root') + 1];
    try {
      const result =
        kind === 'ours'
          ? await runOurs(root, pages, concurrency)
          : kind === 'ours-crawler'
            ? await runOursCrawlerOnly(root, pages, concurrency)
            : await runCrawlee(root, pages, concurrency, kind === 'crawlee-tuned');
      process.stdout.write(`${JSON.stringify(result)}\n`);
    } catch (error) {
      process.stdout.write(`${JSON.stringify({ error: error instanceof Error ? error.message : String(error) })}\n`);
    }
    process.exit(0);
  }
  const summary = await runCrawl({ pages, concurrency, latencyMs: arg('latency', 20), databaseUrl: process.env.DATABASE_URL });
  printCrawl(summary);
  const json = process.argv.indexOf('--json');
  if (json >= 0) writeFileSync(process.argv[json + 1], `${JSON.stringify(summary, null, 2)}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
