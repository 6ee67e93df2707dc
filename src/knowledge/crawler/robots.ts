import robotsParser from 'robots-parser';
import { followRedirects, Stop } from '../../net/redirects.js';
import { CrawlFetchError, type CrawlFetcher } from './fetcher.js';
import { CrawlUrlError, checkCrawlUrl } from './url.js';

/** What robots.txt of one origin (scheme, host, port) lets our user agent do. */
export interface RobotsPolicy {
  /** parsed: a robots.txt was read; allow_all: none (4xx); disallow_all: 5xx or unreachable (RFC 9309 2.3.1.4). */
  kind: 'parsed' | 'allow_all' | 'disallow_all';
  /** Why, for disallow_all. */
  reason?: string;
  /** disallow_all because the host name does not resolve. */
  hostNotFound?: boolean;
  allows(url: URL): boolean;
  /** Crawl-delay for our agent (or *), in milliseconds, capped; 0 when none. */
  crawlDelayMs: number;
  /** Sitemap: lines, as absolute URLs. */
  sitemaps: string[];
}

type Parse = (url: string, contents: string) => {
  isAllowed(url: string, ua?: string): boolean | undefined;
  getCrawlDelay(ua?: string): number | undefined;
  getSitemaps(): string[];
};
// robots-parser is CommonJS (module.exports = function); its typings declare an ES default export.
const parse = ((robotsParser as unknown as { default?: Parse }).default ?? robotsParser) as unknown as Parse;

const MAX_REDIRECTS = 5;

function fixed(kind: 'allow_all' | 'disallow_all', reason?: string): RobotsPolicy {
  return { kind, reason, allows: () => kind === 'allow_all', crawlDelayMs: 0, sitemaps: [] };
}

export interface RobotsOptions {
  fetcher: CrawlFetcher;
  allowPrivate: boolean;
  /** The product token our groups are matched on (User-agent lines), e.g. m2m-knowledge-crawler. */
  agentToken: string;
  maxDelayMs: number;
  signal?: AbortSignal;
}

/**
 * Reads robots.txt of `origin` with RFC 9309's rules: redirects followed (up to five, each hop through the
 * SSRF checks), 2xx parsed (robots-parser: longest match wins, Allow wins a tie, * and $ patterns, groups
 * of the same agent merged), 4xx means no restrictions, 5xx or no answer means nothing may be crawled.
 * More than five redirects counts as unavailable (4xx).
 */
export async function loadRobots(origin: string, opts: RobotsOptions): Promise<RobotsPolicy> {
  const robotsUrl = `${origin}/robots.txt`;
  let target: URL;
  try {
    target = checkCrawlUrl(robotsUrl, opts.allowPrivate);
  } catch (error) {
    return fixed('disallow_all', `robots.txt cannot be requested: ${(error as Error).message}`);
  }
  let followed;
  try {
    followed = await followRedirects(target, {
      maxRedirects: MAX_REDIRECTS,
      request: (url) => opts.fetcher.get(url, () => true, 'text/plain, */*;q=0.5', opts.signal),
      next: (location, from) => {
        try {
          return checkCrawlUrl(new URL(location, from), opts.allowPrivate);
        } catch (error) {
          if (error instanceof CrawlUrlError || error instanceof TypeError) return new Stop(fixed('disallow_all', `robots.txt redirects to a refused URL: ${error.message}`));
          throw error;
        }
      },
    });
  } catch (error) {
    if (error instanceof CrawlFetchError) {
      return { ...fixed('disallow_all', `robots.txt unreachable (${error.code}: ${error.message})`), hostNotFound: error.code === 'host_not_found' };
    }
    throw error;
  }
  if (followed.kind === 'stopped') return followed.value;
  if (followed.kind === 'too_many') return fixed('allow_all');
  const answer = followed.answer;
  if (answer.status >= 500) return fixed('disallow_all', `robots.txt answered HTTP ${answer.status}`);
  if (answer.status >= 400 || answer.status < 200 || answer.status >= 300) return fixed('allow_all');
  const robots = parse(robotsUrl, (answer.body ?? Buffer.alloc(0)).toString('utf8'));
  const delay = robots.getCrawlDelay(opts.agentToken);
  return {
    kind: 'parsed',
    // isAllowed is undefined for URLs of another origin; those are checked against their own robots.txt.
    allows: (url) => robots.isAllowed(url.href, opts.agentToken) !== false,
    crawlDelayMs: delay && Number.isFinite(delay) && delay > 0 ? Math.min(Math.round(delay * 1000), opts.maxDelayMs) : 0,
    sitemaps: robots.getSitemaps(),
  };
}
