import { setMaxListeners } from 'node:events';
import { MIN_TEXT_CHARS } from './extract.js';
import { HostGate } from './gate.js';
import { fetchPage, type Item, type PageFailure, type PageResult, type PreviousPage } from './page-fetch.js';
import { loadRobots, type RobotsPolicy } from './robots.js';
import { isEnabled, requiredUrls } from './selection.js';
import { sitemapUrls, type ListedUrl } from './sitemap.js';
import { checkCrawlUrl, checkedCleanUrl, cleanPageKey, cleanUrl, pageKey, pathOf, resolveLink, siteOf } from './url.js';
import { CrawlAbort, type CrawlCounters, type CrawledPage, type CrawlerOptions, type CrawlSettings } from './crawl-types.js';

export type { PageFailure, PreviousPage };
export { CrawlAbort, type CrawlCounters, type CrawledPage, type CrawlerOptions, type CrawlSettings } from './crawl-types.js';

/** Most pages a website snapshot holds, enabled or not (the spec's pages array maximum). */
export const PAGE_CAP = 500;
const MAX_FAILURES_KEPT = 100;
/** Links kept with a page for a conditional recrawl (a 304 reuses them). */
const MAX_LINKS_KEPT = 1000;
/** A page is carried over on the sitemap's word only while the site confirmed it (200 or 304) this recently. */
export const SITEMAP_TRUST_MS = 30 * 24 * 3_600_000;

interface InFlight {
  result: Promise<PageResult>;
  /** Counted against maxPages while in flight (the page is predicted enabled). */
  reserves: boolean;
}

/**
 * A breadth-first crawl of one site. Pages are requested in queue order (several at once, at most
 * `concurrencyPerHost` per host) but their results are taken in queue order too, so which pages a crawl
 * stores does not depend on timing. Stored pages go to `sink` in that order.
 */
export class SiteCrawler {
  private readonly site: string;
  private readonly robots = new Map<string, Promise<RobotsPolicy>>();
  /** The policies of `robots` once read. */
  private readonly robotsRead = new Map<string, RobotsPolicy>();
  private readonly gates = new Map<string, HostGate>();
  private readonly scheduled = new Set<string>();
  private readonly stored = new Set<string>();
  private readonly queue: Item[] = [];
  /** Sitemap <lastmod> (epoch ms) by page key. */
  private readonly lastmods = new Map<string, number>();
  private readonly stopper = new AbortController();
  private readonly signal: AbortSignal;
  readonly counters: CrawlCounters = { pagesDiscovered: 0, pagesProcessed: 0, pagesFailed: 0 };
  readonly failures: PageFailure[] = [];
  private readonly deadline: number;
  private storedCount = 0;
  private enabledCount = 0;

  constructor(
    private readonly settings: CrawlSettings,
    private readonly opts: CrawlerOptions,
  ) {
    this.site = siteOf(settings.root);
    this.deadline = Date.now() + opts.deadlineMs;
    this.signal = opts.signal ? AbortSignal.any([opts.signal, this.stopper.signal]) : this.stopper.signal;
    // Every request and every request waiting for its host's turn listens to it: many listeners are expected.
    setMaxListeners(0, this.signal);
  }

  /** Runs the crawl; returns how many pages were stored. Throws CrawlAbort when robots.txt forbids crawling at all. */
  async run(sink: (page: CrawledPage) => Promise<void>): Promise<number> {
    const root = cleanUrl(this.settings.root);
    const rootRobots = await this.robotsFor(root);
    if (rootRobots.hostNotFound) throw new CrawlAbort('host_not_found', `nothing was crawled: ${rootRobots.reason}`);
    if (rootRobots.kind === 'disallow_all') throw new CrawlAbort('robots_unavailable', `nothing was crawled: ${rootRobots.reason}`);
    await this.enqueue(root, 0);
    for (const url of requiredUrls(this.settings.rules, root)) await this.enqueue(cleanUrl(url), 0);
    const fetchBudget = Math.min(4 * PAGE_CAP, 4 * this.settings.maxPages + 20);
    const listing = this.listSitemaps(rootRobots.sitemaps, root, fetchBudget);

    const window: InFlight[] = [];
    const windowSize = this.opts.concurrencyPerHost * 2 + 2;
    let next = 0;
    let launched = 0;
    // Requests in flight that may still become a stored page (all of them), or an enabled one (those predicted enabled).
    let reservedEnabled = 0;
    const launch = () => {
      while (window.length < windowSize && next < this.queue.length && launched < fetchBudget && Date.now() < this.deadline) {
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
    };
    try {
      // A first crawl requests the pages queued so far (the root) while the sitemaps are read (their requests
      // bypass the host's gate), unless the host gets one request at a time (Crawl-delay, or a per-host limit
      // of 1). A recrawl waits for them: a page the sitemap says is unchanged is carried over without a request.
      if (!this.settings.previous?.size && rootRobots.crawlDelayMs === 0 && this.opts.concurrencyPerHost > 1) launch();
      await this.enqueueListed(await listing);
      for (;;) {
        if (this.enabledCount >= this.settings.maxPages || this.storedCount >= PAGE_CAP) break;
        launch();
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

  /** Page URLs the sitemaps list (those robots.txt names, and /sitemap.xml). */
  private listSitemaps(declared: readonly string[], root: URL, maxUrls: number): Promise<ListedUrl[]> {
    const sitemaps = [...declared.map((s) => resolveLink(s, root)).filter((u): u is URL => !!u), new URL('/sitemap.xml', root)];
    return sitemapUrls(sitemaps, {
      fetcher: this.opts.fetcher,
      allowPrivate: this.opts.allowPrivate,
      maxBytes: this.opts.maxBytes,
      sameSite: (url) => siteOf(url) === this.site,
      allowed: async (url) => (await this.robotsFor(url)).allows(url),
      signal: this.signal,
      maxUrls,
      maxFiles: 20,
    });
  }

  private async enqueueListed(listed: readonly ListedUrl[]): Promise<void> {
    const urls = listed.map(({ url, lastmod }) => {
      const clean = cleanUrl(url);
      if (lastmod !== undefined) this.lastmods.set(cleanPageKey(clean), lastmod);
      return clean;
    });
    await this.enqueueAll(urls, 1);
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
      }).then((read) => {
        this.robotsRead.set(url.origin, read);
        return read;
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

  /**
   * Queues a cleaned same-site URL that robots.txt allows, once. Returns a promise only while its origin's
   * robots.txt is still being read (a page's links are queued without a wait each).
   */
  private enqueue(url: URL, depth: number): Promise<void> | undefined {
    const key = cleanPageKey(url);
    if (this.scheduled.has(key) || siteOf(url) !== this.site) return undefined;
    this.scheduled.add(key);
    const read = this.robotsRead.get(url.origin);
    if (!read) return this.robotsFor(url).then((robots) => this.queueAllowed(robots, url, key, depth));
    this.queueAllowed(read, url, key, depth);
    return undefined;
  }

  /** Queues URLs in order, waiting only where an origin's robots.txt is still being read. */
  private async enqueueAll(urls: readonly URL[], depth: number): Promise<void> {
    for (const url of urls) {
      const reading = this.enqueue(url, depth);
      if (reading) await reading;
    }
  }

  private queueAllowed(robots: RobotsPolicy, url: URL, key: string, depth: number): void {
    if (!robots.allows(url)) return;
    this.queue.push({ url, key, depth });
    this.counters.pagesDiscovered += 1;
  }

  private fetchPage(item: Item): Promise<PageResult> {
    const carried = this.unchangedPerSitemap(item);
    if (carried) return Promise.resolve(carried);
    return fetchPage(item, {
      fetcher: this.opts.fetcher,
      allowPrivate: this.opts.allowPrivate,
      site: this.site,
      signal: this.signal,
      robotsFor: (url) => this.robotsFor(url),
      gateFor: (url) => this.gateFor(url),
      isStored: (key) => this.stored.has(key),
      previous: (key) => this.settings.previous?.get(key),
      deadline: this.deadline,
    });
  }

  /**
   * A page of the previous crawl whose sitemap <lastmod> is not newer than the request that last confirmed its
   * content (within SITEMAP_TRUST_MS): the same page, reused without a request, as after a 304. It keeps that
   * confirmation time, so a change the sitemap reports late is still seen on a later crawl.
   */
  private unchangedPerSitemap(item: Item): PageResult | undefined {
    const previous = this.settings.previous?.get(item.key);
    const lastmod = this.lastmods.get(item.key);
    const fetchedAt = previous?.fetchedAt;
    if (!previous || fetchedAt === undefined || lastmod === undefined || lastmod > fetchedAt || Date.now() - fetchedAt > SITEMAP_TRUST_MS) return undefined;
    return { kind: 'unchanged', item, final: item.url, hops: [], previous, validators: { etag: previous.etag, lastModified: previous.lastModified }, fetchedAt };
  }

  private recordFailure(failure: PageFailure): void {
    this.counters.pagesFailed += 1;
    if (this.failures.length < MAX_FAILURES_KEPT) this.failures.push({ ...failure, message: failure.message.slice(0, 500) });
  }

  /** Same-site links of a page the crawler may request (cleaned, in page order, once each); none when it is nofollow. */
  private followedLinks(links: readonly string[], base: URL, nofollow: boolean): URL[] {
    if (nofollow) return [];
    const out = new Map<string, URL>();
    for (const href of links) {
      const link = resolveLink(href, base);
      if (!link) continue;
      try {
        const url = checkedCleanUrl(link, this.opts.allowPrivate);
        if (siteOf(url) === this.site && !out.has(url.href)) out.set(url.href, url);
      } catch {
        // not a URL the crawler may request
      }
    }
    return [...out.values()];
  }

  /** The page's canonical page key: a same-site <link rel="canonical"> the crawler could fetch, else its own key. */
  private canonicalKey(declaredHref: string | undefined, base: URL, finalKey: string): string {
    const declared = declaredHref ? resolveLink(declaredHref, base) : undefined;
    if (!declared || siteOf(declared) !== this.site) return finalKey;
    try {
      return pageKey(checkCrawlUrl(declared, this.opts.allowPrivate));
    } catch {
      return finalKey;
    }
  }

  private async consume(result: PageResult, sink: (page: CrawledPage) => Promise<void>): Promise<void> {
    this.counters.pagesProcessed += 1;
    if (result.kind === 'skipped') return;
    if (result.kind === 'failed') {
      this.recordFailure(result.failure);
      return;
    }
    const { item, final } = result;
    for (const key of result.hops) this.scheduled.add(key);
    const finalKey = cleanPageKey(final);
    if (this.stored.has(finalKey)) return;
    const page = result.kind === 'page' ? result.page : undefined;
    const base = (page?.base && resolveLink(page.base, final)) || final;
    const canonical = page ? this.canonicalKey(page.canonical, base, finalKey) : result.kind === 'unchanged' ? result.previous.canonicalKey : finalKey;
    if (this.stored.has(canonical)) return;
    this.stored.add(finalKey).add(canonical);
    this.scheduled.add(canonical);

    const links = page ? this.followedLinks(page.links, base, page.nofollow) : result.kind === 'unchanged' ? result.previous.links.map((href) => new URL(href)) : [];
    if (item.depth < this.settings.crawlDepth) await this.enqueueAll(links, item.depth + 1);
    if (page?.noindex) return this.recordFailure({ url: final.href, code: 'noindex', message: 'the page asks not to be indexed (meta robots noindex)' });
    if (page && page.text.length < MIN_TEXT_CHARS) {
      return this.recordFailure({ url: final.href, code: 'thin_content', message: `only ${page.text.length} characters of text (at least ${MIN_TEXT_CHARS} needed)` });
    }
    const canonicalUrl = new URL(canonical);
    const enabled = isEnabled({ url: finalKey, canonicalUrl: canonical, path: pathOf(canonicalUrl) }, this.settings.rules, this.settings.defaultEnabled, this.settings.root);
    if (enabled && this.enabledCount >= this.settings.maxPages) return;
    this.storedCount += 1;
    if (enabled) this.enabledCount += 1;
    await sink({
      order: this.storedCount - 1,
      url: final.href,
      canonicalUrl: canonical,
      path: pathOf(canonicalUrl),
      title: page?.title,
      text: page?.text ?? '',
      enabled,
      links: links.slice(0, MAX_LINKS_KEPT).map((link) => link.href),
      validators: result.validators,
      unchangedFrom: result.kind === 'unchanged' ? result.previous.id : undefined,
      fetchedAt: result.fetchedAt,
    });
  }
}
