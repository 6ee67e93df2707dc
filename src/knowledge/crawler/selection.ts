import type { SelectionRule } from '../website-repo.js';
import { pageKey, pathOf, siteOf } from './url.js';

export type { SelectionRule };

export interface PageIdentity {
  /** Page key of the URL the page was fetched at. */
  url: string;
  /** Page key of its canonical URL. */
  canonicalUrl: string;
  /** Path of the canonical URL (no trailing slash, no query). */
  path: string;
}

/** A path rule's key as matched: leading slash, no trailing slash (root stays "/"). */
function rulePath(key: string): string {
  const path = key.startsWith('/') ? key : `/${key}`;
  return path.length > 1 ? path.replace(/\/+$/, '') || '/' : path;
}

/** A page or required rule's key as a page key: an absolute URL, or a path on the root's origin. */
export function ruleUrl(key: string, root: URL): string | undefined {
  try {
    return pageKey(new URL(key, root));
  } catch {
    return undefined;
  }
}

function pathMatches(prefix: string, path: string): boolean {
  return prefix === '/' || path === prefix || path.startsWith(`${prefix}/`);
}

/**
 * Whether a page is enabled. In order: a `page` or `required` rule naming the page (its URL or canonical URL)
 * decides; else the `path` rule with the longest matching prefix (whole segments: /blog matches /blog and
 * /blog/post, not /blogger); else `defaultEnabled`.
 */
export function isEnabled(page: PageIdentity, rules: readonly SelectionRule[], defaultEnabled: boolean, root: URL): boolean {
  for (const rule of rules) {
    if (rule.kind === 'path') continue;
    const key = ruleUrl(rule.key, root);
    if (key !== undefined && (key === page.url || key === page.canonicalUrl)) return rule.enabled;
  }
  let best: SelectionRule | undefined;
  let bestLength = -1;
  for (const rule of rules) {
    if (rule.kind !== 'path') continue;
    const prefix = rulePath(rule.key);
    if (pathMatches(prefix, page.path) && prefix.length > bestLength) {
      best = rule;
      bestLength = prefix.length;
    }
  }
  return best ? best.enabled : defaultEnabled;
}

/** Pages the `required` rules name (same site only): crawled right after the root, linked or not, at any depth. */
export function requiredUrls(rules: readonly SelectionRule[], root: URL): URL[] {
  const out: URL[] = [];
  for (const rule of rules) {
    if (rule.kind !== 'required') continue;
    try {
      const url = new URL(rule.key, root);
      if (siteOf(url) === siteOf(root)) out.push(url);
    } catch {
      // validated on input; an unparseable key names nothing
    }
  }
  return out;
}

/** Input check of rules: paths start with "/", page and required keys are same-site URLs or paths. Returns an error message or undefined. */
export function ruleProblem(rule: SelectionRule, root: URL): string | undefined {
  if (rule.kind === 'path') return rule.key.startsWith('/') ? undefined : 'a path rule key must start with "/"';
  let url: URL;
  try {
    url = new URL(rule.key, root);
  } catch {
    return 'must be a URL or a path';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  if (siteOf(url) !== siteOf(root)) return 'must be on the same site as rootUrl';
  return undefined;
}

export { pathOf };
