/**
 * Website crawl benchmark (issues 9 and 23): a generated 500-page site on 127.0.0.1 (pages of about 6 KB with
 * 5–8 links, a fixed 20 ms response latency, an ETag on every page, a sitemap with every page's lastmod) served
 * by its own process, crawled by: our crawler through the real job (fetch, extract, chunk, store, embed, switch
 * generations) and then again (recrawls of the unchanged site), our crawler alone (fetch and extract, nothing stored), a
 * minimal fetch + parse crawler (the ceiling of a crawler on this site and box), Crawlee's CheerioCrawler at
 * the same fixed concurrency, and our job with maxPages 50 (the site counts the requests it gets). Each crawler
 * runs in its own child process so peak RSS is its own. With two or more cores, the site is pinned to core 0
 * and every crawler to core 1 (taskset), so a crawler never competes with the site for a core.
 *
 *   node --import tsx bench/crawl.ts [--pages 500] [--concurrency 10] [--latency 20] [--json out.json]
 *
 * DATABASE_URL set: our crawler stores into a fresh schema there; unset: in-memory PGlite.
 * `runCrawl()` is what `npm run bench` calls (`--only crawl`); it returns the figures instead of printing them.
 */
import http from 'node:http';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AddressInfo } from 'node:net';
import { systemCtx } from '../src/context.js';
import { CpuMeter } from './lib.js';

type Kind = 'ours' | 'ours-crawler' | 'minimal' | 'crawlee' | 'ours-50';

export interface Result {
  crawler: string;
  pages: number;
  seconds: number;
  pagesPerSecond: number;
  peakRssMb: number;
  /** CPU time of the crawler's process per page (user + system). */
  cpuMsPerPage: number;
  /** Ours: the recrawl of the unchanged site right after the first crawl (sitemap lastmod, then conditional requests). */
  recrawlSeconds?: number;
  /** Ours: requests the recrawl made (robots.txt and sitemap included). */
  recrawlRequests?: number;
  /** Ours: a further recrawl with the sitemap's lastmods gone: every page asked conditionally (304). */
  conditionalRecrawlSeconds?: number;
  note?: string;
  /** Over the child's whole run, in % of one core: the crawler, the site, PostgreSQL, everything else; and the load average before it. */
  cpuPct?: Record<string, number>;
  loadAverage?: number;
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
export function buildSite(pages: number): string[] {
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

/**
 * Serves the site (run in its own process): an ETag per page, 304 to If-None-Match; /sitemap.xml lists every page
 * with the site's start as `<lastmod>` (none between GET /__lastmod-off and /__lastmod-on); GET /__requests counts requests.
 */
export async function serve(pages: string[], latencyMs: number, port = 0): Promise<{ url: string; close: () => Promise<void> }> {
  let requests = 0;
  let lastmods = true;
  const generated = new Date().toISOString();
  const sitemap = (origin: string) =>
    `<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n` +
    pages.map((_, i) => `<url><loc>${origin}/page/${i}</loc>${lastmods ? `<lastmod>${generated}</lastmod>` : ''}</url>\n`).join('') +
    '</urlset>\n';
  const server = http.createServer((req, res) => {
    if (req.url === '/__requests') return void res.writeHead(200, { 'content-type': 'text/plain' }).end(String(requests));
    if (req.url === '/__lastmod-off' || req.url === '/__lastmod-on') {
      lastmods = req.url === '/__lastmod-on';
      return void res.writeHead(204).end();
    }
    requests += 1;
    const match = /^\/page\/(\d+)$/.exec(req.url ?? '');
    const index = req.url === '/' ? 0 : match ? Number(match[1]) : -1;
    setTimeout(() => {
      if (req.url === '/sitemap.xml') return void res.writeHead(200, { 'content-type': 'application/xml' }).end(sitemap(`http://${req.headers.host ?? ''}`));
      if (index < 0 || index >= pages.length) return void res.writeHead(404).end('not found');
      const etag = `"page-${index}"`;
      if (req.headers['if-none-match'] === etag) return void res.writeHead(304, { etag }).end();
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', etag }).end(pages[index]);
    }, latencyMs);
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}/`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Cores for the site and for the crawlers, when there are two and taskset exists; else none (no pinning). */
function pinning(): { site: string; crawler: string } | undefined {
  if (availableParallelism() < 2) return undefined;
  return spawnSync('taskset', ['-V']).status === 0 ? { site: '0', crawler: '1' } : undefined;
}

/** The command line for a child, pinned to `core` when given. */
function command(args: string[], core: string | undefined): [string, string[]] {
  return core ? ['taskset', ['-c', core, process.execPath, ...args]] : [process.execPath, args];
}

/** The site in its own process; resolves with its URL once it listens. */
function startSiteProcess(pages: number, latency: number, core: string | undefined): Promise<{ url: string; pid: number | undefined; requests: () => Promise<number>; stop: () => void }> {
  const [cmd, args] = command(['--import', 'tsx', fileURLToPath(import.meta.url), '--site', '--pages', String(pages), '--latency', String(latency)], core);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  running.add(proc);
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((l) => l.startsWith('http://'));
      if (!line) return;
      const url = line.trim();
      resolve({
        url,
        pid: proc.pid,
        requests: async () => Number(await (await fetch(`${url}__requests`)).text()),
        stop: () => {
          running.delete(proc);
          proc.kill('SIGTERM');
        },
      });
    });
    proc.on('exit', (code) => reject(new Error(`the site exited with ${code}`)));
  });
}

function cpuMsPerPage(since: NodeJS.CpuUsage, pages: number): number {
  const used = process.cpuUsage(since);
  return pages > 0 ? (used.user + used.system) / 1000 / pages : 0;
}

function peakRssMb(): number {
  return Math.round(process.resourceUsage().maxRSS / 1024);
}

/**
 * Our crawler, through the real runtime: admin creates the website, the worker runs knowledge.crawl; with
 * `recrawl`, the unchanged site is crawled again at once (every page carried over by its sitemap lastmod), and
 * once more with the sitemap's lastmods gone (conditional requests: every page answers 304).
 */
async function runOurs(root: string, pages: number, concurrency: number, recrawl: boolean): Promise<Result> {
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
  await warmUp();
  const baseline = Math.round(process.memoryUsage().rss / 1048576);
  const cpu0 = process.cpuUsage();
  const admin = async (url: string, body: unknown) => {
    const res = await runtime.app.inject({ method: 'POST', url: `/admin/v1${url}`, headers: { authorization: 'Bearer bench' }, payload: body as object });
    if (res.statusCode >= 300) throw new Error(res.body);
    return res.json();
  };
  const untilDone = async (tenantId: string, jobId: string) => {
    for (;;) {
      const { job } = await runtime.services.crawls.getJob(systemCtx(tenantId), { jobId });
      if (job.status === 'completed' || job.status === 'failed') return job;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  const tenant = await admin('/tenants', { name: 'Bench' });
  const started = performance.now();
  const website = await admin(`/tenants/${tenant.tenantId}/knowledge/websites`, { rootUrl: root, crawlDepth: 10, maxPages: Math.min(pages, 500) });
  const job = await untilDone(tenant.tenantId, website.latestJob.jobId);
  const seconds = (performance.now() - started) / 1000;
  if (job.status !== 'completed') throw new Error(`crawl failed: ${JSON.stringify(job.error)}`);
  const stored = job.snapshotPages ?? 0;
  const cpu = cpuMsPerPage(cpu0, stored);
  let recrawlSeconds: number | undefined;
  let recrawlRequests: number | undefined;
  let conditionalRecrawlSeconds: number | undefined;
  let again: Awaited<ReturnType<typeof untilDone>> | undefined;
  const siteRequests = async () => Number(await (await fetch(`${root}__requests`)).text());
  const crawlAgain = async () => {
    const restarted = performance.now();
    const queued = await runtime.services.crawls.start(systemCtx(tenant.tenantId), { websiteId: website.websiteId });
    const done = await untilDone(tenant.tenantId, queued.job.jobId);
    if (done.status !== 'completed') throw new Error(`recrawl failed: ${JSON.stringify(done.error)}`);
    return { done, seconds: (performance.now() - restarted) / 1000 };
  };
  if (recrawl) {
    const before = await siteRequests();
    const first = await crawlAgain();
    recrawlRequests = (await siteRequests()) - before;
    recrawlSeconds = first.seconds;
    again = first.done;
    await fetch(`${root}__lastmod-off`);
    conditionalRecrawlSeconds = (await crawlAgain()).seconds;
    await fetch(`${root}__lastmod-on`);
  }
  await runtime.close(1000);
  if (schema) {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  }
  const changes = again?.changes ? `; recrawl changes ${JSON.stringify(again.changes)}` : '';
  return {
    crawler: recrawl ? `ours (fetch+extract+chunk+store+embed, ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})` : 'ours, maxPages 50',
    pages: stored,
    seconds,
    pagesPerSecond: stored / seconds,
    peakRssMb: peakRssMb(),
    cpuMsPerPage: cpu,
    recrawlSeconds,
    recrawlRequests,
    conditionalRecrawlSeconds,
    note: `${job.chunks} chunks, ${job.progress.chunksEmbedded} embedded; RSS ${baseline} MB before the crawl${changes}`,
  };
}

/**
 * undici, which a server loads with its first outbound request (src/net/undici.ts), is loaded before the clock
 * starts, as the minimal crawler's and Crawlee's modules are: a crawl is measured, not a process's first request.
 */
async function warmUp(): Promise<void> {
  const { loadUndici } = await import('../src/net/undici.js');
  await loadUndici();
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
  await warmUp();
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const stored = await crawler.run(async (page) => void (chars += page.text.length));
  const seconds = (performance.now() - started) / 1000;
  await fetcher.close();
  return { crawler: 'ours, crawler only (fetch+extract, nothing stored)', pages: stored, seconds, pagesPerSecond: stored / seconds, peakRssMb: peakRssMb(), cpuMsPerPage: cpuMsPerPage(cpu0, stored), note: `${chars} characters` };
}

/**
 * A minimal crawler: `concurrency` loops taking the next queued URL, undici GET on one keep-alive pool, one
 * node-html-parser parse for the main text and the same-host links; no robots, no politeness, nothing stored.
 * What a crawler can do at most on this site and box.
 */
async function runMinimal(root: string, pages: number, concurrency: number): Promise<Result> {
  const { Agent, request } = await import('undici');
  const { parse } = await import('node-html-parser');
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000 });
  const origin = new URL(root).origin;
  const queue = [root];
  const seen = new Set(queue);
  let next = 0;
  let done = 0;
  let chars = 0;
  let active = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    const pump = () => {
      while (active < concurrency && next < queue.length && done + active < pages) {
        const url = queue[next++];
        active += 1;
        void request(url, { dispatcher: agent })
          .then(async (res) => {
            const html = await res.body.text();
            const doc = parse(html);
            chars += (doc.querySelector('main') ?? doc).textContent.length;
            for (const a of doc.querySelectorAll('a')) {
              const href = a.getAttribute('href');
              if (!href) continue;
              const link = new URL(href, url);
              link.hash = '';
              if (link.origin === origin && !seen.has(link.href)) {
                seen.add(link.href);
                queue.push(link.href);
              }
            }
            done += 1;
          })
          .then(() => {
            active -= 1;
            if (active === 0 && (next >= queue.length || done >= pages)) resolve();
            else pump();
          }, reject);
      }
    };
    pump();
  });
  const seconds = (performance.now() - started) / 1000;
  await agent.close();
  return { crawler: 'minimal fetch+parse crawler (undici, node-html-parser)', pages: done, seconds, pagesPerSecond: done / seconds, peakRssMb: peakRssMb(), cpuMsPerPage: cpuMsPerPage(cpu0, done), note: `${chars} characters` };
}

/**
 * Crawlee's CheerioCrawler, run at its best (bench/README.md says how each setting was checked):
 * - `maxRequestsPerCrawl` is a cap the crawl never reaches (4 × pages + 20, our crawler's request cap): with the
 *   limit at the site's size, every `enqueueLinks` near the end of discovery cut its links into batches of the
 *   few requests left in the budget and slept 1 s between batches (Crawlee's `addRequestsBatched`), which
 *   stalled the crawl at ~17 pages/s. The site has exactly `pages` pages, so the crawl ends when the queue does;
 * - its modules are loaded before the clock starts by a one-page crawl (got-scraping, the header generator's
 *   networks and http2-wrapper load on the first request: ~0.7 s of CPU), as ours are imported first;
 * - no session pool (cookies and session rotation are for sites that block; our crawler has neither);
 * - a fixed concurrency (min = max), its pool polled every 10 ms instead of every 500 ms, its system-status
 *   limits at 100 % so a busy box's CPU or event-loop readings never hold it back, and so no system snapshots
 *   (each spawns `ps`) more than once an hour.
 */
async function runCrawlee(root: string, pages: number, concurrency: number): Promise<Result> {
  const storage = mkdtempSync(path.join(tmpdir(), 'crawlee-bench-'));
  process.env.CRAWLEE_STORAGE_DIR = storage;
  try {
    const { CheerioCrawler, Configuration, log, LogLevel } = await import('@crawlee/cheerio');
    log.setLevel(LogLevel.OFF);
    const configuration = () => new Configuration({ persistStorage: false, purgeOnStart: true, systemInfoIntervalMillis: 3_600_000 });
    const warmUp = new CheerioCrawler({ maxRequestsPerCrawl: 1, useSessionPool: false, async requestHandler({ $ }) { $('main').text(); } }, configuration());
    await warmUp.run([root]);
    let count = 0;
    let chars = 0;
    const crawler = new CheerioCrawler(
      {
        minConcurrency: concurrency,
        maxConcurrency: concurrency,
        maxRequestsPerCrawl: 4 * pages + 20,
        maxRequestRetries: 0,
        useSessionPool: false,
        persistCookiesPerSession: false,
        autoscaledPoolOptions: {
          maybeRunIntervalSecs: 0.01,
          systemStatusOptions: { maxCpuOverloadedRatio: 1, maxEventLoopOverloadedRatio: 1, maxMemoryOverloadedRatio: 1, maxClientOverloadedRatio: 1 },
        },
        async requestHandler({ $, enqueueLinks }) {
          count += 1;
          chars += $('main').text().length;
          await enqueueLinks({ strategy: 'same-hostname' });
        },
      },
      configuration(),
    );
    const cpu0 = process.cpuUsage();
    const started = performance.now();
    await crawler.run([root]);
    const seconds = (performance.now() - started) / 1000;
    return {
      crawler: 'Crawlee CheerioCrawler (fetch+parse+text; fixed concurrency, warmed up, no sessions)',
      pages: count,
      seconds,
      pagesPerSecond: count / seconds,
      peakRssMb: peakRssMb(),
      cpuMsPerPage: cpuMsPerPage(cpu0, count),
      note: `${chars} characters`,
    };
  } finally {
    rmSync(storage, { recursive: true, force: true });
  }
}

const running = new Set<ChildProcess>();

/** SIGKILLs the crawler children still running (for the bench's signal handlers). */
export function killCrawlChildren(): void {
  for (const proc of running) proc.kill('SIGKILL');
}

/** A crawler run in its own process (pinned to `core`); with `databaseUrl` our crawl job stores there (schema bench_crawl_<pid>). */
function child(kind: Kind, root: string, pages: number, concurrency: number, core: string | undefined, sitePid: number | undefined, databaseUrl?: string): Promise<Result | { error: string }> {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  delete env.DATABASE_SCHEMA;
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  const [cmd, args] = command(['--import', 'tsx', fileURLToPath(import.meta.url), '--child', kind, '--root', root, '--pages', String(pages), '--concurrency', String(concurrency)], core);
  return new Promise((resolve) => {
    const loadAverage = Math.round(loadavg()[0] * 10) / 10;
    const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
    const meter = new CpuMeter({ crawler: proc.pid, site: sitePid }, databaseUrl !== undefined);
    running.add(proc);
    // Bounded: a crawler that has not finished after 5 minutes is killed and reported as failed.
    const timer = setTimeout(() => proc.kill('SIGKILL'), 300_000);
    let out = '';
    // Read when the child prints its result, just before it exits (its CPU is no longer readable after).
    let cpuPct: Record<string, number> | undefined;
    proc.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (!cpuPct && /(^|\n)\{/.test(out)) cpuPct = meter.stop();
    });
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(proc);
      const line = out.trim().split('\n').filter((l) => l.startsWith('{')).pop();
      const parsed = line ? (JSON.parse(line) as Result | { error: string }) : { error: `exited with ${code ?? signal}: ${out.slice(-500)}` };
      const result = 'error' in parsed ? parsed : { ...parsed, cpuPct, loadAverage };
      // The child drops its schema itself; this catches a child that died first (taskset keeps the pid: it execs node).
      if ((kind === 'ours' || kind === 'ours-50') && databaseUrl && proc.pid) void dropSchema(databaseUrl, `bench_crawl_${proc.pid}`).finally(() => resolve(result));
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
  /** ours pages/s ÷ Crawlee's pages/s (goal ≥ 1.5 for the full job). */
  pagesPerSecond: number;
  /** ours peak RSS ÷ Crawlee's peak RSS (goal < 1). */
  peakRss: number;
}

export interface CrawlSummary {
  pages: number;
  concurrency: number;
  latencyMs: number;
  averagePageBytes: number;
  database: 'postgres' | 'pglite';
  /** Cores the site and the crawlers were pinned to, if any. */
  pinned?: { site: string; crawler: string };
  results: Array<{ kind: Kind } & (Result | { error: string })>;
  crawlee?: Result;
  ratios: {
    fullJob?: CrawlRatio;
    crawlerOnly?: CrawlRatio;
    /** Our crawler alone ÷ the minimal crawler, pages/s (goal ≥ 0.9). */
    crawlerVsMinimal?: number;
    /** The conditional recrawl's time ÷ the first crawl's (goal < 0.3). */
    recrawlShare?: number;
  };
  /** Requests the site got for a crawl with maxPages 50 (robots.txt and sitemap included; goal ≤ 55). */
  requestsAtMaxPages50?: number;
}

/** Serves the generated site from its own process and runs the crawlers one after another, each in its own process. */
export async function runCrawl(options: CrawlOptions = {}): Promise<CrawlSummary> {
  const pages = options.pages ?? 500;
  const concurrency = options.concurrency ?? 10;
  const latency = options.latencyMs ?? 20;
  const say = options.log ?? console.log;
  const average = Math.round(buildSite(pages).reduce((sum, p) => sum + p.length, 0) / pages);
  const pinned = pinning();
  const site = await startSiteProcess(pages, latency, pinned?.site);
  say(`crawl: site of ${pages} pages of ~${average} bytes, ${latency} ms latency, concurrency ${concurrency}; our job stores into ${options.databaseUrl ? 'PostgreSQL' : 'PGlite'}; ${pinned ? `site on core ${pinned.site}, crawlers on core ${pinned.crawler}` : 'no CPU pinning'}`);
  const results: CrawlSummary['results'] = [];
  let requestsAtMaxPages50: number | undefined;
  try {
    for (const kind of ['ours', 'ours-crawler', 'minimal', 'crawlee', 'ours-50'] as const) {
      const before = await site.requests();
      const r = await child(kind, site.url, kind === 'ours-50' ? 50 : pages, concurrency, pinned?.crawler, site.pid, options.databaseUrl);
      if (kind === 'ours-50' && !('error' in r)) requestsAtMaxPages50 = (await site.requests()) - before;
      results.push({ kind, ...r });
      say('error' in r ? `  ${kind}: failed: ${r.error}` : `  ${r.crawler}: ${r.pages} pages in ${r.seconds.toFixed(2)} s, ${r.pagesPerSecond.toFixed(1)} pages/s, peak RSS ${r.peakRssMb} MB`);
    }
  } finally {
    site.stop();
  }
  const ok = (kind: Kind) => results.find((r): r is { kind: Kind } & Result => r.kind === kind && !('error' in r));
  const crawlee = ok('crawlee');
  const ratio = (r: Result | undefined): CrawlRatio | undefined =>
    r && crawlee ? { pagesPerSecond: r.pagesPerSecond / crawlee.pagesPerSecond, peakRss: r.peakRssMb / crawlee.peakRssMb } : undefined;
  const ours = ok('ours');
  const alone = ok('ours-crawler');
  const minimal = ok('minimal');
  return {
    pages,
    concurrency,
    latencyMs: latency,
    averagePageBytes: average,
    database: options.databaseUrl ? 'postgres' : 'pglite',
    pinned,
    results,
    crawlee,
    ratios: {
      fullJob: ratio(ours),
      crawlerOnly: ratio(alone),
      crawlerVsMinimal: alone && minimal ? alone.pagesPerSecond / minimal.pagesPerSecond : undefined,
      recrawlShare: ours?.recrawlSeconds !== undefined ? ours.recrawlSeconds / ours.seconds : undefined,
    },
    requestsAtMaxPages50,
  };
}

export function printCrawl(summary: CrawlSummary): void {
  const pin = summary.pinned ? `site on core ${summary.pinned.site}, crawlers on core ${summary.pinned.crawler}` : 'no CPU pinning';
  console.log(`\nCrawl — ${summary.pages}-page generated site (~${summary.averagePageBytes} B a page, ${summary.latencyMs} ms latency), concurrency ${summary.concurrency}; each crawler in its own process; ${pin}`);
  for (const r of summary.results) {
    if ('error' in r) console.log(`  ${r.kind}: failed: ${r.error}`);
    else {
      const recrawl = r.recrawlSeconds !== undefined
        ? `  recrawl ${r.recrawlSeconds.toFixed(2)} s (${r.recrawlRequests} requests; all conditional, no lastmod: ${r.conditionalRecrawlSeconds?.toFixed(2)} s)`
        : '';
      const c = r.cpuPct;
      const load = c ? `  CPU % crawler/site/pg/other ${c.crawler ?? '-'}/${c.site ?? '-'}/${c.postgres ?? '-'}/${c.other ?? '-'}, load ${r.loadAverage}` : '';
      console.log(`  ${r.crawler.padEnd(72)} ${String(r.pages).padStart(4)} pages  ${r.seconds.toFixed(2)} s  ${r.pagesPerSecond.toFixed(1).padStart(6)} pages/s  ${r.cpuMsPerPage.toFixed(1)} ms CPU a page  peak RSS ${r.peakRssMb} MB${recrawl}${load}  (${r.note})`);
    }
  }
  const { fullJob, crawlerOnly, crawlerVsMinimal, recrawlShare } = summary.ratios;
  if (fullJob) console.log(`ratio ours (full job) / Crawlee: ${fullJob.pagesPerSecond.toFixed(2)}x pages/s (goal >= 1.5x), ${fullJob.peakRss.toFixed(2)}x peak RSS (goal < 1)`);
  if (crawlerOnly) console.log(`ratio ours (crawler only) / Crawlee: ${crawlerOnly.pagesPerSecond.toFixed(2)}x pages/s, ${crawlerOnly.peakRss.toFixed(2)}x peak RSS`);
  if (crawlerVsMinimal !== undefined) console.log(`ratio ours (crawler only) / minimal crawler: ${crawlerVsMinimal.toFixed(2)}x pages/s (goal >= 0.9x)`);
  if (recrawlShare !== undefined) console.log(`recrawl of the unchanged site (sitemap lastmod, conditional requests) / first crawl: ${(recrawlShare * 100).toFixed(0)}% of the time (goal < 30%)`);
  if (summary.requestsAtMaxPages50 !== undefined) console.log(`requests for a crawl with maxPages 50: ${summary.requestsAtMaxPages50} (goal <= 55)`);
}

async function main(): Promise<void> {
  const childIndex = process.argv.indexOf('--child');
  const pages = arg('pages', 500);
  const concurrency = arg('concurrency', 10);
  if (process.argv.includes('--site')) {
    const site = await serve(buildSite(pages), arg('latency', 20));
    process.stdout.write(`${site.url}\n`);
    process.on('SIGTERM', () => void site.close().then(() => process.exit(0)));
    return;
  }
  if (childIndex >= 0) {
    const kind = process.argv[childIndex + 1];
    const root = process.argv[process.argv.indexOf('--root') + 1];
    try {
      const result =
        kind === 'ours' || kind === 'ours-50'
          ? await runOurs(root, pages, concurrency, kind === 'ours')
          : kind === 'ours-crawler'
            ? await runOursCrawlerOnly(root, pages, concurrency)
            : kind === 'minimal'
              ? await runMinimal(root, pages, concurrency)
              : await runCrawlee(root, pages, concurrency);
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
