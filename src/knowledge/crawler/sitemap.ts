import { gunzipSync } from 'node:zlib';
import { followRedirects, Stop } from '../../net/redirects.js';
import { CrawlFetchError, type CrawlFetcher } from './fetcher.js';
import { checkCrawlUrl } from './url.js';

export interface SitemapOptions {
  fetcher: CrawlFetcher;
  allowPrivate: boolean;
  maxBytes: number;
  /** Same site as the root: sitemaps and their entries elsewhere are ignored. */
  sameSite(url: URL): boolean;
  /** robots.txt allows fetching this URL. */
  allowed(url: URL): Promise<boolean>;
  signal?: AbortSignal;
  /** At most this many page URLs, from at most maxFiles sitemap files. */
  maxUrls: number;
  maxFiles: number;
}

const LOC = /<loc>\s*(?:<!\[CDATA\[)?\s*([^<\]]*?)\s*(?:\]\]>)?\s*<\/loc>/gi;
const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&apos;': "'" };

function decodeEntities(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|apos);/g, (m) => ENTITIES[m] ?? m);
}

/** <loc> values of a sitemap or sitemap index (the sitemaps.org protocol); `index` tells which it was. */
export function parseSitemap(xml: string): { index: boolean; locs: string[] } {
  const index = /<sitemapindex[\s>]/i.test(xml);
  const locs: string[] = [];
  for (const match of xml.matchAll(LOC)) locs.push(decodeEntities(match[1]));
  return { index, locs };
}

async function fetchXml(url: URL, opts: SitemapOptions): Promise<string | undefined> {
  let followed;
  try {
    followed = await followRedirects(url, {
      maxRedirects: 5,
      request: (target) => opts.fetcher.get(target, () => true, 'application/xml, text/xml;q=0.9, */*;q=0.5', opts.signal),
      next: (location, from) => {
        let target: URL;
        try {
          target = checkCrawlUrl(new URL(location, from), opts.allowPrivate);
        } catch {
          return new Stop(undefined);
        }
        return opts.sameSite(target) ? target : new Stop(undefined);
      },
    });
  } catch (error) {
    if (error instanceof CrawlFetchError) return undefined;
    throw error;
  }
  if (followed.kind !== 'answer' || !followed.answer.body) return undefined;
  let bytes = followed.answer.body;
  // .xml.gz files are served as application/gzip (not Content-Encoding): the bytes themselves are gzip.
  if (bytes.length > 2 && bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      bytes = gunzipSync(bytes, { maxOutputLength: opts.maxBytes });
    } catch {
      return undefined;
    }
  }
  return bytes.toString('utf8');
}

/**
 * Page URLs listed by the site's sitemaps (sitemap indexes followed), same site only, in file order. A
 * sitemap that cannot be fetched or parsed is skipped: sitemaps only add discovery, links still work.
 */
export async function sitemapUrls(start: URL[], opts: SitemapOptions): Promise<URL[]> {
  const queue = [...start];
  const seenFiles = new Set<string>();
  const out: URL[] = [];
  const seenUrls = new Set<string>();
  while (queue.length > 0 && seenFiles.size < opts.maxFiles && out.length < opts.maxUrls) {
    const file = queue.shift()!;
    if (seenFiles.has(file.href) || !opts.sameSite(file) || !(await opts.allowed(file))) continue;
    seenFiles.add(file.href);
    const xml = await fetchXml(file, opts);
    if (!xml) continue;
    const { index, locs } = parseSitemap(xml);
    for (const loc of locs) {
      let url: URL;
      try {
        url = checkCrawlUrl(new URL(loc, file), opts.allowPrivate);
      } catch {
        continue;
      }
      if (!opts.sameSite(url)) continue;
      if (index) queue.push(url);
      else if (!seenUrls.has(url.href) && out.length < opts.maxUrls) {
        seenUrls.add(url.href);
        out.push(url);
      }
    }
  }
  return out;
}
