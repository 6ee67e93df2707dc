import { followRedirects, Stop } from '../../net/redirects.js';
import { extractPage, type ExtractedPage } from './extract.js';
import { CrawlFetchError, type Answer, type CrawlFetcher } from './fetcher.js';
import type { HostGate } from './gate.js';
import type { RobotsPolicy } from './robots.js';
import { checkedCleanUrl, cleanPageKey, siteOf } from './url.js';

const MAX_REDIRECTS = 5;
const HTML = /^\s*(text\/html|application\/xhtml\+xml)\s*(;|$)/i;
const ACCEPT = 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.1';

export interface PageFailure {
  url: string;
  code: string;
  message: string;
}

/** A queued URL: its page key and link hops from the root. */
export interface Item {
  url: URL;
  key: string;
  depth: number;
}

/** A page of the previous crawl, stored at this URL: what a recrawl asks about and reuses on 304. */
export interface PreviousPage {
  id: string;
  /** Page key of its canonical URL. */
  canonicalKey: string;
  /** The same-site links the crawl followed from it (absolute URLs; empty when it was nofollow). */
  links: string[];
  etag?: string;
  lastModified?: string;
  /** When the site last confirmed its content (epoch ms of the request answered 200 or 304), if known. */
  fetchedAt?: number;
}

/** Response validators to keep with a stored page. */
export interface Validators {
  etag?: string;
  lastModified?: string;
}

export type PageResult =
  | { kind: 'page'; item: Item; final: URL; hops: string[]; page: ExtractedPage; validators: Validators; fetchedAt: number }
  | { kind: 'unchanged'; item: Item; final: URL; hops: string[]; previous: PreviousPage; validators: Validators; fetchedAt: number }
  | { kind: 'failed'; item: Item; failure: PageFailure }
  | { kind: 'skipped'; item: Item };

/** What fetching a page needs of the crawl it belongs to. */
export interface PageFetchContext {
  fetcher: CrawlFetcher;
  allowPrivate: boolean;
  /** The crawl's site (siteOf the root). */
  site: string;
  signal: AbortSignal;
  robotsFor(url: URL): Promise<RobotsPolicy>;
  gateFor(url: URL): Promise<HostGate>;
  isStored(key: string): boolean;
  previous(key: string): PreviousPage | undefined;
  /** The crawl's deadline (epoch ms): a Retry-After that ends later is not waited for. */
  deadline: number;
}

/** A 429 or 503 with Retry-After is asked again this many times at most. */
const MAX_RETRY_AFTER = 3;

/** Retry-After (delay-seconds or an HTTP date) as milliseconds from now; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

const fail = (item: Item, url: URL | string, code: string, message: string): PageResult => ({
  kind: 'failed',
  item,
  failure: { url: typeof url === 'string' ? url : url.href, code, message },
});

/** If-None-Match / If-Modified-Since from the previous crawl's answer for this URL. */
function conditionalHeaders(previous: PreviousPage | undefined): Record<string, string> | undefined {
  if (!previous || (!previous.etag && !previous.lastModified)) return undefined;
  return {
    ...(previous.etag ? { 'if-none-match': previous.etag } : {}),
    ...(previous.lastModified ? { 'if-modified-since': previous.lastModified } : {}),
  };
}

/**
 * Fetches one page, following redirects hop by hop (each hop: SSRF checks, same site, robots, not stored
 * yet). A URL stored by the previous crawl is asked for conditionally: 304 reuses that page unread. Never rejects.
 */
export async function fetchPage(item: Item, ctx: PageFetchContext): Promise<PageResult> {
  let target = item.url;
  const hops: string[] = [];
  // Retry-After waits so far, and when the last request was sent (the time its answer confirms).
  const state = { retries: 0, askedAt: 0 };
  try {
    const followed = await followRedirects<Answer, PageResult>(item.url, {
      maxRedirects: MAX_REDIRECTS,
      request: (url) => {
        target = url;
        return requestPage(item, url, hops, state, ctx);
      },
      next: (location, from) => {
        let next: URL;
        try {
          next = checkedCleanUrl(new URL(location, from), ctx.allowPrivate);
        } catch (error) {
          return new Stop(fail(item, from, 'blocked_destination', `redirect to a refused URL: ${(error as Error).message}`));
        }
        if (siteOf(next) !== ctx.site) return new Stop(fail(item, from, 'offsite_redirect', `redirects off the site to ${next.host}`));
        const key = cleanPageKey(next);
        if (ctx.isStored(key)) return new Stop({ kind: 'skipped', item });
        hops.push(key);
        return next;
      },
    });
    if (followed.kind === 'stopped') return followed.value;
    if (followed.kind === 'too_many') return fail(item, followed.url, 'redirect', `more than ${MAX_REDIRECTS} redirects`);
    const { answer, url: final } = followed;
    if (answer.status < 200 || answer.status >= 300) return fail(item, final, 'http_status', `HTTP ${answer.status}`);
    if (!answer.body) return fail(item, final, 'unsupported_content_type', `not an HTML page (${answer.contentType ?? 'no content type'})`);
    const validators = { etag: answer.etag, lastModified: answer.lastModified };
    return { kind: 'page', item, final, hops, page: extractPage(answer.body.toString('utf8')), validators, fetchedAt: state.askedAt };
  } catch (error) {
    if (error instanceof CrawlFetchError) return fail(item, target, error.code, error.message);
    if (ctx.signal.aborted) return { kind: 'skipped', item };
    return fail(item, target, 'internal_error', error instanceof Error ? error.message : String(error));
  }
}

/** One hop: robots.txt, the host's gate, a conditional request for a page stored before, Retry-After waits. */
async function requestPage(item: Item, target: URL, hops: string[], state: { retries: number; askedAt: number }, ctx: PageFetchContext): Promise<Answer | Stop<PageResult>> {
  for (;;) {
    if (!(await ctx.robotsFor(target)).allows(target)) return new Stop(fail(item, target, 'robots_disallowed', 'robots.txt disallows this URL'));
    const gate = await ctx.gateFor(target);
    const previous = ctx.previous(cleanPageKey(target));
    const conditional = conditionalHeaders(previous);
    const answer = await gate.run(() => {
      state.askedAt = Date.now();
      return ctx.fetcher.get(target, (type) => HTML.test(type), ACCEPT, ctx.signal, conditional);
    }, ctx.signal);
    if (answer.status === 429 || answer.status === 503) {
      const wait = retryAfterMs(answer.retryAfter);
      if (wait !== undefined && state.retries < MAX_RETRY_AFTER && Date.now() + wait < ctx.deadline) {
        // The whole host waits, not just this page; then the same URL is asked again.
        gate.pauseUntil(Date.now() + wait);
        state.retries += 1;
        continue;
      }
      if (wait !== undefined) return new Stop(fail(item, target, 'http_status', `HTTP ${answer.status}; Retry-After ${Math.ceil(wait / 1000)} s ends past the crawl's deadline or retries`));
    }
    if (answer.status === 304 && previous && conditional) {
      const validators = { etag: answer.etag ?? previous.etag, lastModified: answer.lastModified ?? previous.lastModified };
      return new Stop({ kind: 'unchanged', item, final: target, hops, previous, validators, fetchedAt: state.askedAt });
    }
    return answer;
  }
}
