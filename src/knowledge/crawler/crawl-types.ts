// What a site crawl (crawler.ts) is given and gives back.
import type { CrawlFetcher } from './fetcher.js';
import type { PreviousPage, Validators } from './page-fetch.js';
import type { SelectionRule } from './selection.js';

export interface CrawlSettings {
  root: URL;
  crawlDepth: number;
  /** Enabled pages (after selection rules) the snapshot may hold. */
  maxPages: number;
  rules: readonly SelectionRule[];
  defaultEnabled: boolean;
  /** Pages of the previous crawl by the page key they were stored at: asked for conditionally. */
  previous?: ReadonlyMap<string, PreviousPage>;
}

export interface CrawlerOptions {
  fetcher: CrawlFetcher;
  allowPrivate: boolean;
  /** robots.txt product token. */
  agentToken: string;
  concurrencyPerHost: number;
  maxDelayMs: number;
  maxBytes: number;
  /** How long the crawl may run: no request starts after it, and no Retry-After is waited for past it. */
  deadlineMs: number;
  signal?: AbortSignal;
}

export interface CrawledPage {
  /** 0-based position among stored pages (breadth-first order). */
  order: number;
  url: string;
  canonicalUrl: string;
  path: string;
  title?: string;
  /** Extracted text; empty for an unchanged page (`unchangedFrom`). */
  text: string;
  enabled: boolean;
  /** Same-site links followed from it (absolute URLs). */
  links: string[];
  validators: Validators;
  /** The previous crawl's page it equals (a 304 answer, or a sitemap lastmod not newer than its fetch): its text, chunks and vectors are reused. */
  unchangedFrom?: string;
  /** When the site last confirmed this content (epoch ms of the request answered 200 or 304). */
  fetchedAt: number;
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
