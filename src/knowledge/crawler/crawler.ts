import { setMaxListeners } from 'node:events';
import { MIN_TEXT_CHARS, extractPage, type ExtractedPage } from './extract.js';
import { CrawlFetchError, type CrawlFetcher } from './fetcher.js';
import { HostGate } from './gate.js';
import { loadRobots, type RobotsPolicy } from './robots.js';
import { isEnabled, requiredUrls, type SelectionRule } from './selection.js';
import { sitemapUrls } from './sitemap.js';
import { checkCrawlUrl, cleanUrl, pageKey, pathOf, resolveLink, siteOf } from './url.js';

/** Most pages a website snapshot holds, enabled or not (the spec's pages array maximum). */
export const PAGE_CAP = 500;
const MAX_REDIRECTS = 5;
const MAX_FAILURES_KEPT = 100;
const HTML = /^\s*(text\/html|application\/xhtml\+xml)\s*(;|$)/i;

export interface CrawlSettings {
  root: URL;
  crawlDepth: number;
  /** Enabled pages (after selection rules) the snapshot may hold. */
  maxPages: number;
  rules: readonly SelectionRule[];
  defaultEnabled: boolean;
}

export interface CrawlerOptions {
  fetcher: CrawlFetcher;
  allowPrivate: boolean;
  /** robots.txt product token. */
  agentToken: string;
  concurrencyPerHost: number;
  maxDelayMs: number;
  maxBytes: number;
  signal?: AbortSignal;
}

export interface CrawledPage {
  /** 0-based position among stored pages (breadth-first order). */
  order: number;
  url: string;
  canonicalUrl: string;
  path: string;
  title?: string;
  text: string;
  enabled: boolean;
}

export interface PageFailure {
  url: string;
  code: string;
  message: string;
}

export interface CrawlCounters {
  pagesDiscovered: number;
  pagesProcessed: number;
  pagesFailed: number;
}

/** The crawl as a whole could not run (nothing was crawled). */
export class CrawlAbort extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'CrawlAbort';
  }
}

interface Item {
  url: URL;
  key: string;
  depth: number;
}

interface InFlight {
  result: Promise<Result>;
  /** Counted against maxPages while in flight (the page is predicted enabled). */
  reserves: boolean;
}

type Result =
  | { kind: 'page'; item: Item; final: URL; hops: string[]; page: ExtractedPage }
  | { kind: 'failed'; item: Item; failure: PageFailure }
  | { kind: 'skipped'; item: Item };

const fail = (item: Item, url: URL | string, code: string, message: string): Result => ({
  kind: 'failed',
  item,
  failure: { url: typeof url === 'string' ? url : url.href, code, message },
});

/**
 * A breadth-first crawl of one site. Pages are requested in queue order (several at once, at most
 * `concurrencyPerHost` per host) but their results are taken in queue order too, so which pages a crawl
 * stores does not depend on timing. Stored pages go to `sink` in that order.
 */
export class SiteCrawler {
  private readonly site: string;
  private readonly robots = new Map<string, Promise<RobotsPolicy>>();
  private readonly gates = new Map<string, HostGate>();
  private readonly scheduled = new Set<string>();
  private readonly stored = new Set<string>();
  private readonly queue: Item[] = [];
  private readonly stopper = new AbortController();
  private readonly signal: AbortSignal;
  readonly counters: CrawlCounters = { pagesDiscovered: 0, pagesProcessed: 0, pagesFailed: 0 };
  readonly failures: PageFailure[] = [];
  private storedCount = 0;
  private enabledCount = 0;

  constructor(
    private readonly settings: CrawlSettings,
    private readonly opts: CrawlerOptions,
  ) {
    this.site = siteOf(settings.root);
    this.signal = opts.signal ? AbortSignal.any([opts.signal, this.stopper.signal]) : this.stopper.signal;
    // Every request and every request waiting for its host's turn listens to it: many listeners are expected.
    setMaxListeners(0, this.signal);
  }

  /** Runs the crawl; returns how many pages were stored. Throws CrawlAbort when robots.txt forbids crawling at all. */
  async run(sink: (page: CrawledPage) => Promise<void>): Promise<number> {
    const root = cleanUrl(this.settings.root);
    const rootRobots = await this.robotsFor(root);
    if (rootRobots.kind === 'disallow_all') throw new CrawlAbort('robots_unavailable', `nothing was crawled: ${rootRobots.reason}`);
    await this.enqueue(root, 0);
    for (const url of requiredUrls(this.settings.rules, root)) await this.enqueue(cleanUrl(url), 0);
    const fetchBudget = Math.min(4 * PAGE_CAP, 4 * this.settings.maxPages + 20);
    const sitemaps = [...rootRobots.sitemaps.map((s) => resolveLink(s, root)).filter((u): u is URL => !!u), new URL('/sitemap.xml', root)];
    const listed = await sitemapUrls(sitemaps, {
      fetcher: this.opts.fetcher,
      allowPrivate: this.opts.allowPrivate,
      maxBytes: this.opts.maxBytes,
      sameSite: (url) => siteOf(url) === this.site,
      allowed: async (url) => (await this.robotsFor(url)).allows(url),
      signal: this.signal,
      maxUrls: fetchBudget,
      maxFiles: 20,
    });
    for (const url of listed) await this.enqueue(cleanUrl(url), 1);

    const window: InFlight[] = [];
    const windowSize = this.opts.concurrencyPerHost * 2 + 2;
    let next = 0;
    let launched = 0;
    // Requests in flight that may still become a stored page (all of them), or an enabled one (those predicted enabled).
    let reservedEnabled = 0;
    try {
      for (;;) {
        if (this.enabledCount >= this.settings.maxPages || this.storedCount >= PAGE_CAP) break;
        while (window.length < windowSize && next < this.queue.length && launched < fetchBudget) {
          const item = this.queue[next];
          if (this.stored.has(item.key)) {
            next += 1;
            continue;
          }
          // Never fetch ahead past what may still be stored: every request in flight could end up a stored page.
          const reserves = this.predictEnabled(item);
          if (this.storedCount + window.length >= PAGE_CAP) break;
          if (reserves && this.enabledCount + reservedEnabled >= this.settings.maxPages) break;
          next += 1;
          launched += 1;
          if (reserves) reservedEnabled += 1;
          window.push({ result: this.fetchPage(item), reserves });
        }
        const head = window.shift();
        if (!head) break;
        const result = await head.result;
        if (head.reserves) reservedEnabled -= 1;
        await this.consume(result, sink);
        this.signal.throwIfAborted();
      }
    } finally {
      // Requests still in flight (a crawl that ends early, on a limit or an error) are not wanted.
      this.stopper.abort(new Error('crawl finished'));
      await Promise.allSettled(window.map((w) => w.result));
    }
    this.opts.signal?.throwIfAborted();
    return this.storedCount;
  }

  /**
   * Whether the page at this URL will count against maxPages, judged by its URL before it is fetched (its
   * canonical URL, known only after, may still change that: such a page is dropped if maxPages is reached).
   */
  private predictEnabled(item: Item): boolean {
    return isEnabled({ url: item.key, canonicalUrl: item.key, path: pathOf(item.url) }, this.settings.rules, this.settings.defaultEnabled, this.settings.root);
  }

  private robotsFor(url: URL): Promise<RobotsPolicy> {
    let policy = this.robots.get(url.origin);
    if (!policy) {
      policy = loadRobots(url.origin, {
        fetcher: this.opts.fetcher,
        allowPrivate: this.opts.allowPrivate,
        agentToken: this.opts.agentToken,
        maxDelayMs: this.opts.maxDelayMs,
        signal: this.signal,
      });
      this.robots.set(url.origin, policy);
    }
    return policy;
  }

  private async gateFor(url: URL): Promise<HostGate> {
    let gate = this.gates.get(url.host);
    if (!gate) {
      const robots = await this.robotsFor(url);
      gate = this.gates.get(url.host) ?? new HostGate(this.opts.concurrencyPerHost, robots.crawlDelayMs);
      this.gates.set(url.host, gate);
    }
    return gate;
  }

  /** Queues a same-site URL that robots.txt allows, once. */
  private async enqueue(url: URL, depth: number): Promise<void> {
    const key = pageKey(url);
    if (this.scheduled.has(key) || siteOf(url) !== this.site) return;
    this.scheduled.add(key);
    if (!(await this.robotsFor(url)).allows(url)) return;
    this.queue.push({ url, key, depth });
    this.counters.pagesDiscovered += 1;
  }

  /** Fetches one page, following redirects hop by hop (each hop: SSRF checks, same site, robots, not stored yet). Never rejects. */
  private async fetchPage(item: Item): Promise<Result> {
    let target = item.url;
    const hops: string[] = [];
    try {
      for (let hop = 0; hop <= MAX_REDIRECTS; hop += 1) {
        if (!(await this.robotsFor(target)).allows(target)) return fail(item, target, 'robots_disallowed', 'robots.txt disallows this URL');
        const gate = await this.gateFor(target);
        const answer = await gate.run(() => this.opts.fetcher.get(target, (type) => HTML.test(type), 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.1', this.signal), this.signal);
        if (answer.status >= 300 && answer.status < 400 && answer.location) {
          let next: URL;
          try {
            next = cleanUrl(checkCrawlUrl(new URL(answer.location, target), this.opts.allowPrivate));
          } catch (error) {
            return fail(item, target, 'blocked_destination', `redirect to a refused URL: ${(error as Error).message}`);
          }
          if (siteOf(next) !== this.site) return fail(item, target, 'offsite_redirect', `redirects off the site to ${next.host}`);
          const key = pageKey(next);
          if (this.stored.has(key)) return { kind: 'skipped', item };
          hops.push(key);
          target = next;
          continue;
        }
        if (answer.status < 200 || answer.status >= 300) return fail(item, target, 'http_status', `HTTP ${answer.status}`);
        if (!answer.body) return fail(item, target, 'unsupported_content_type', `not an HTML page (${answer.contentType ?? 'no content type'})`);
        return { kind: 'page', item, final: target, hops, page: extractPage(answer.body.toString('utf8')) };
      }
      return fail(item, target, 'redirect', `more than ${MAX_REDIRECTS} redirects`);
    } catch (error) {
      if (error instanceof CrawlFetchError) return fail(item, target, error.code, error.message);
      if (this.signal.aborted) return { kind: 'skipped', item };
      return fail(item, target, 'internal_error', error instanceof Error ? error.message : String(error));
    }
  }

  private recordFailure(failure: PageFailure): void {
    this.counters.pagesFailed += 1;
    if (this.failures.length < MAX_FAILURES_KEPT) this.failures.push({ ...failure, message: failure.message.slice(0, 500) });
  }

  private async consume(result: Result, sink: (page: CrawledPage) => Promise<void>): Promise<void> {
    this.counters.pagesProcessed += 1;
    if (result.kind === 'skipped') return;
    if (result.kind === 'failed') {
      this.recordFailure(result.failure);
      return;
    }
    const { item, final, page } = result;
    for (const key of result.hops) this.scheduled.add(key);
    const finalKey = pageKey(final);
    if (this.stored.has(finalKey)) return;
    const base = (page.base && resolveLink(page.base, final)) || final;
    let canonical = finalKey;
    const declared = page.canonical ? resolveLink(page.canonical, base) : undefined;
    if (declared && siteOf(declared) === this.site) {
      try {
        canonical = pageKey(checkCrawlUrl(declared, this.opts.allowPrivate));
      } catch {
        // a canonical the crawler could not fetch either is ignored
      }
    }
    if (this.stored.has(canonical)) return;
    this.stored.add(finalKey).add(canonical);
    this.scheduled.add(canonical);

    if (!page.nofollow && item.depth < this.settings.crawlDepth) {
      for (const href of page.links) {
        const link = resolveLink(href, base);
        if (!link) continue;
        try {
          await this.enqueue(cleanUrl(checkCrawlUrl(link, this.opts.allowPrivate)), item.depth + 1);
        } catch {
          // not a URL the crawler may request
        }
      }
    }
    if (page.noindex) return this.recordFailure({ url: final.href, code: 'noindex', message: 'the page asks not to be indexed (meta robots noindex)' });
    if (page.text.length < MIN_TEXT_CHARS) {
      return this.recordFailure({ url: final.href, code: 'thin_content', message: `only ${page.text.length} characters of text (at least ${MIN_TEXT_CHARS} needed)` });
    }
    const canonicalUrl = new URL(canonical);
    const enabled = isEnabled({ url: finalKey, canonicalUrl: canonical, path: pathOf(canonicalUrl) }, this.settings.rules, this.settings.defaultEnabled, this.settings.root);
    if (enabled && this.enabledCount >= this.settings.maxPages) return;
    this.storedCount += 1;
    if (enabled) this.enabledCount += 1;
    await sink({ order: this.storedCount - 1, url: final.href, canonicalUrl: canonical, path: pathOf(canonicalUrl), title: page.title, text: page.text, enabled });
  }
}
