import { isIPv4 } from 'node:net';
import { isPublicIPv4 } from '../../net/guard.js';

export const MAX_URL_LENGTH = 2048;

/** Query parameters that only track a visit: removed, so tagged links name the same page. */
const TRACKING = /^(utm_[a-z0-9_]*|gclid|gbraid|wbraid|fbclid|msclkid|dclid|yclid|mc_cid|mc_eid|_ga|_gl)$/i;
const BLOCKED_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa'];

export class CrawlUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CrawlUrlError';
  }
}

/** Removes the fragment. The setter parses the URL again, so it runs only when there is one ("…#" has an empty `hash`). */
function dropFragment(url: URL): void {
  if (url.href.includes('#')) url.hash = '';
}

/**
 * Parses and checks a URL the crawler may request. Always: http or https, a host, no credentials, at most
 * 2048 characters. With private destinations refused (the default): only the default port of the scheme
 * (80 or 443), no localhost / .local / .internal / .home.arpa names, no private or reserved IPv4 literal
 * and no IPv6 literal. Names are resolved and re-checked on every connection by the guarded connector.
 */
export function checkCrawlUrl(raw: string | URL, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = raw instanceof URL ? new URL(raw.href) : new URL(raw);
  } catch {
    throw new CrawlUrlError('must be a valid absolute URL');
  }
  dropFragment(url);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CrawlUrlError('must use http or https');
  if (url.username !== '' || url.password !== '') throw new CrawlUrlError('must not contain credentials');
  if (url.hostname === '') throw new CrawlUrlError('must have a host');
  if (url.href.length > MAX_URL_LENGTH) throw new CrawlUrlError(`must be at most ${MAX_URL_LENGTH} characters`);
  if (allowPrivate) return url;
  if (url.port !== '') throw new CrawlUrlError('must use the default port of its scheme (80 for http, 443 for https)');
  const host = url.hostname.toLowerCase().replace(/\.$/, '');
  if (host.startsWith('[')) throw new CrawlUrlError('IPv6 address URLs are unsupported');
  if (host === 'localhost' || BLOCKED_SUFFIXES.some((suffix) => host.endsWith(suffix))) throw new CrawlUrlError('host must be a public host name');
  if (isIPv4(host) && !isPublicIPv4(host)) throw new CrawlUrlError('host must be a public address');
  return url;
}

/**
 * The URL as the crawler requests it: fragment dropped, tracking parameters (utm_*, gclid, fbclid, …)
 * removed, remaining parameters sorted by name, an empty query dropped. (Host lowercasing and dropping a
 * default port are done by the URL parser.)
 */
export function cleanUrl(url: URL): URL {
  return cleanInPlace(new URL(url.href));
}

/** checkCrawlUrl, then cleanUrl, on the one copy checkCrawlUrl makes. */
export function checkedCleanUrl(raw: string | URL, allowPrivate: boolean): URL {
  return cleanInPlace(checkCrawlUrl(raw, allowPrivate));
}

function cleanInPlace(url: URL): URL {
  dropFragment(url);
  if (url.search) {
    const kept = [...url.searchParams].filter(([name]) => !TRACKING.test(name));
    kept.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    url.search = kept.length > 0 ? new URLSearchParams(kept).toString() : '';
  }
  return url;
}

/**
 * The identity of a page: the cleaned URL without a trailing slash (except the root path "/"). Two URLs
 * with the same key are one page, fetched and stored once. The trailing slash is only dropped from the
 * key: requests go to the URL as linked, so a site that insists on "/rooms/" is not sent into a loop.
 */
export function pageKey(url: URL): string {
  return cleanPageKey(cleanUrl(url));
}

/** pageKey of a URL that cleanUrl returned. */
export function cleanPageKey(clean: URL): string {
  const path = clean.pathname;
  if (path.length <= 1 || !path.endsWith('/')) return clean.href;
  const trimmed = path.replace(/\/+$/, '') || '/';
  // An http(s) URL without credentials (all the crawler requests) is its origin, path and query.
  if ((clean.protocol === 'http:' || clean.protocol === 'https:') && !clean.username && !clean.password) return `${clean.origin}${trimmed}${clean.search}`;
  const copy = new URL(clean.href);
  copy.pathname = trimmed;
  return copy.href;
}

/** The normalised form of a root URL as the website records it (its page key). */
export function normalizeRootUrl(url: URL): string {
  return pageKey(url);
}

/**
 * The site a URL belongs to: its host without a leading "www." plus an explicit port. www.example.com and
 * example.com are one site (sites serve both and redirect between them); http and https of a host are one
 * site too. Any other subdomain is another site.
 */
export function siteOf(url: URL): string {
  let host = url.hostname.toLowerCase();
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host.startsWith('www.')) host = host.slice(4);
  return url.port ? `${host}:${url.port}` : host;
}

/** The path a selection rule sees: the pathname without a trailing slash (root "/"), no query. */
export function pathOf(url: URL): string {
  const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
  return path || '/';
}

/** Resolves an href against a base; undefined for javascript:, mailto:, data: and unparseable links. */
export function resolveLink(href: string, base: URL): URL | undefined {
  const trimmed = href.trim();
  if (!trimmed || trimmed.startsWith('#')) return undefined;
  try {
    const url = new URL(trimmed, base);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}
