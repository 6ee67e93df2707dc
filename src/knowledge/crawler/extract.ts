import { parse, type HTMLElement } from 'node-html-parser';
import { htmlText } from '../html-text.js';

/** Pages whose main text is shorter than this are failed pages (navigation shells, empty templates, errors). */
export const MIN_TEXT_CHARS = 200;

export interface ExtractedPage {
  title?: string;
  /** Main content as text: headings as Markdown headings, blocks as paragraphs (what the chunker expects). */
  text: string;
  /** href values of <a> and <area>, resolved later against `base`. */
  links: string[];
  /** href of <link rel="canonical">. */
  canonical?: string;
  /** href of <base>. */
  base?: string;
  /** <meta name="robots"> says noindex / nofollow (or none). */
  noindex: boolean;
  nofollow: boolean;
}

/** Never content: scripts and media, forms, and navigation. */
const SKIP = new Set([
  'script', 'style', 'noscript', 'template', 'svg', 'iframe', 'object', 'embed', 'canvas', 'video', 'audio', 'map',
  'nav', 'aside', 'form', 'button', 'select', 'textarea', 'head', 'dialog',
]);
/** Page chrome, skipped unless the content root is this element itself. */
const CHROME = new Set(['header', 'footer']);
const CHROME_ROLES = new Set(['navigation', 'banner', 'contentinfo', 'complementary', 'search', 'menu', 'menubar', 'dialog']);
function skipped(el: HTMLElement, tag: string, keepChrome: boolean): boolean {
  if (SKIP.has(tag)) return true;
  if (!keepChrome && CHROME.has(tag)) return true;
  const attrs = el.rawAttrs;
  if (attrs.length === 0) return false;
  const role = el.getAttribute('role');
  if (role && CHROME_ROLES.has(role.toLowerCase())) return true;
  return el.getAttribute('aria-hidden') === 'true' || el.hasAttribute('hidden');
}

/** Text of `scope` with page chrome left out. */
function textOf(scope: HTMLElement, keepChrome: boolean): string {
  return htmlText(scope, { skip: (el, tag) => skipped(el, tag, keepChrome), keepLineBreaks: false });
}

function attr(el: HTMLElement, name: string): string | undefined {
  const value = el.getAttribute(name);
  return value === undefined || value === null ? undefined : value;
}

/**
 * One parse of a page gives everything the crawler needs: links, canonical, meta robots, title and the main
 * text. Main content, Readability-style but simpler: the page's <main> (or role=main), else its single
 * <article>, with navigation, asides, forms and scripts dropped; page headers and footers are dropped too
 * outside that element. When that element holds less than MIN_TEXT_CHARS of text, the whole body is used.
 */
export function extractPage(html: string): ExtractedPage {
  const root = parse(html, { comment: false, blockTextElements: { script: false, noscript: false, style: false, pre: true } });
  const links: string[] = [];
  for (const a of root.querySelectorAll('a[href], area[href]')) {
    const href = attr(a, 'href');
    if (href) links.push(href);
  }
  let canonical: string | undefined;
  for (const link of root.querySelectorAll('link[href]')) {
    const rel = (attr(link, 'rel') ?? '').toLowerCase().split(/\s+/);
    if (rel.includes('canonical')) {
      canonical = attr(link, 'href');
      break;
    }
  }
  let noindex = false;
  let nofollow = false;
  for (const meta of root.querySelectorAll('meta[name]')) {
    if ((attr(meta, 'name') ?? '').toLowerCase() !== 'robots') continue;
    const content = (attr(meta, 'content') ?? '').toLowerCase();
    if (/\b(noindex|none)\b/.test(content)) noindex = true;
    if (/\b(nofollow|none)\b/.test(content)) nofollow = true;
  }
  const base = root.querySelector('base[href]');
  const title = root.querySelector('title')?.text.replace(/\s+/g, ' ').trim() || undefined;

  const body = root.querySelector('body') ?? root;
  const articles = body.querySelectorAll('article');
  const main = body.querySelector('main') ?? body.querySelector('[role="main"]') ?? (articles.length === 1 ? articles[0] : null);
  let text = main ? textOf(main, true) : '';
  if (text.length < MIN_TEXT_CHARS) {
    const whole = textOf(body, false);
    if (whole.length > text.length) text = whole;
  }
  const heading = title ?? (root.querySelector('h1')?.text.replace(/\s+/g, ' ').trim() || undefined);
  return { title: heading?.slice(0, 160), text, links, canonical, base: base ? attr(base, 'href') : undefined, noindex, nofollow };
}
