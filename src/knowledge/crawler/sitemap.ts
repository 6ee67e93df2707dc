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
/** The first `<loc>` of one element (LOC without the global flag: no lastIndex carried between elements). */
const FIRST_LOC = new RegExp(LOC.source, 'i');
const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&apos;': "'" };

function decodeEntities(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|apos);/g, (m) => ENTITIES[m] ?? m);
}

/** A page a sitemap lists, with its `<lastmod>` (epoch ms, see `lastmodMs`) when it has a readable one. */
export interface SitemapEntry {
  loc: string;
  lastmod?: number;
}

const URL_ELEMENT = /<url[\s>][\s\S]*?<\/url>/gi;
const LASTMOD = /<lastmod>\s*([^<]*?)\s*<\/lastmod>/i;
const W3C_DATETIME = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;
const HOUR = 3_600_000;

/**
 * A sitemap `<lastmod>` (W3C Datetime: `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, or a date and time with a time zone) as
 * the latest instant it can mean, in epoch ms: a date is the end of that year, month or day, and a time without
 * a zone is read as at UTC−12 (the last place on Earth where that local time happens), so a value that is
 * vague never looks older than the change it records. Undefined when it is not such a value.
 */
export function lastmodMs(value: string): number | undefined {
  const m = W3C_DATETIME.exec(value.trim());
  if (!m) return undefined;
  const [, y, mo, d, h, mi, sec, frac, zone] = m;
  const year = Number(y);
  const month = mo ? Number(mo) - 1 : undefined;
  const day = d ? Number(d) : undefined;
  if (month !== undefined && month > 11) return undefined;
  if (day !== undefined && (day < 1 || day > 31)) return undefined;
  if (h === undefined) {
    // The first instant after the period, at UTC−12, less one millisecond.
    const after = month === undefined ? Date.UTC(year + 1, 0, 1) : day === undefined ? Date.UTC(year, month + 1, 1) : Date.UTC(year, month, day + 1);
    return after + 12 * HOUR - 1;
  }
  const base = Date.UTC(year, Number(mo) - 1, Number(d), Number(h), Number(mi), sec ? Number(sec) : 0, frac ? Math.floor(Number(frac) * 1000) : 0);
  if (Number.isNaN(base) || Number(h) > 23 || Number(mi) > 59 || (sec !== undefined && Number(sec) > 60)) return undefined;
  if (!zone) return base + 12 * HOUR;
  if (zone === 'Z') return base;
  const sign = zone.startsWith('-') ? -1 : 1;
  const offset = (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
  return base - sign * offset;
}

/**
 * The entries of a sitemap or sitemap index (the sitemaps.org protocol); `index` tells which it was. A urlset's
 * entries are its `<url>` elements (each `<loc>` with its `<lastmod>`); a file without them gives every `<loc>`.
 */
export function parseSitemap(xml: string): { index: boolean; entries: SitemapEntry[] } {
  const index = /<sitemapindex[\s>]/i.test(xml);
  const entries: SitemapEntry[] = [];
  if (!index) {
    for (const element of xml.matchAll(URL_ELEMENT)) {
      const loc = FIRST_LOC.exec(element[0]);
      if (!loc) continue;
      const lastmod = LASTMOD.exec(element[0]);
      const at = lastmod ? lastmodMs(decodeEntities(lastmod[1])) : undefined;
      entries.push(at === undefined ? { loc: decodeEntities(loc[1]) } : { loc: decodeEntities(loc[1]), lastmod: at });
    }
    if (entries.length > 0) return { index, entries };
  }
  for (const match of xml.matchAll(LOC)) entries.push({ loc: decodeEntities(match[1]) });
  return { index, entries };
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

/** A page URL a sitemap lists, with its `<lastmod>` (epoch ms) when given. */
export interface ListedUrl {
  url: URL;
  lastmod?: number;
}

/**
 * Page URLs listed by the site's sitemaps (sitemap indexes followed), same site only, in file order. A
 * sitemap that cannot be fetched or parsed is skipped: sitemaps only add discovery, links still work.
 */
export async function sitemapUrls(start: URL[], opts: SitemapOptions): Promise<ListedUrl[]> {
  const queue = [...start];
  const seenFiles = new Set<string>();
  const out: ListedUrl[] = [];
  const seenUrls = new Set<string>();
  while (queue.length > 0 && seenFiles.size < opts.maxFiles && out.length < opts.maxUrls) {
    const file = queue.shift()!;
    if (seenFiles.has(file.href) || !opts.sameSite(file) || !(await opts.allowed(file))) continue;
    seenFiles.add(file.href);
    const xml = await fetchXml(file, opts);
    if (!xml) continue;
    const { index, entries } = parseSitemap(xml);
    for (const { loc, lastmod } of entries) {
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
        out.push(lastmod === undefined ? { url } : { url, lastmod });
      }
    }
  }
  return out;
}
