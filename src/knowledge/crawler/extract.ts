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

/**
 * One parse of a page gives everything the crawler needs: links, canonical, meta robots, title and the main
 * text. Main content, Readability-style but simpler: the page's <main> (or role=main), else its single
 * <article>, with navigation, asides, forms and scripts dropped; page headers and footers are dropped too
 * outside that element. When that element holds less than MIN_TEXT_CHARS of text, the whole body is used.
 */
export function extractPage(html: string): ExtractedPage {
  const root = parse(html, { comment: false, blockTextElements: { script: false, noscript: false, style: false, pre: true } });
  const found = scan(root);
  const body = found.body ?? root;
  const main = found.main ?? found.roleMain ?? (found.articles === 1 ? found.article : undefined);
  let text = main ? textOf(main, true) : '';
  if (text.length < MIN_TEXT_CHARS) {
    const whole = textOf(body, false);
    if (whole.length > text.length) text = whole;
  }
  const title = found.title?.text.replace(/\s+/g, ' ').trim() || undefined;
  const heading = title ?? (found.h1?.text.replace(/\s+/g, ' ').trim() || undefined);
  return { title: heading?.slice(0, 160), text, links: found.links, canonical: found.canonical, base: found.base, noindex: found.noindex, nofollow: found.nofollow };
}

interface Scan {
  /** href of every <a href> and <area href> (non-empty), in document order. */
  links: string[];
  canonical?: string;
  base?: string;
  noindex: boolean;
  nofollow: boolean;
  /** The first of each. */
  title?: HTMLElement;
  h1?: HTMLElement;
  body?: HTMLElement;
  /** Inside the first <body> (or anywhere when there is none): the first <main>, the first role="main", the <article>s. */
  main?: HTMLElement;
  roleMain?: HTMLElement;
  article?: HTMLElement;
  articles: number;
}

/**
 * One walk over the parsed page in document order, instead of a CSS selector query (compiled and run over the
 * whole tree) for each thing the crawler looks for.
 */
function scan(root: HTMLElement): Scan {
  const out: Scan = { links: [], noindex: false, nofollow: false, articles: 0 };
  // Elements inside <body> are only told apart from the rest once a <body> is known to exist.
  const inner: Array<{ el: HTMLElement; tag: string; inBody: boolean }> = [];
  const walk = (el: HTMLElement, inBody: boolean) => {
    for (const node of el.childNodes) {
      if (node.nodeType !== 1) continue;
      const child = node as HTMLElement;
      const tag = child.rawTagName ? child.rawTagName.toLowerCase() : '';
      let childInBody = inBody;
      switch (tag) {
        case 'a':
        case 'area': {
          const href = child.getAttribute('href');
          if (href) out.links.push(href);
          break;
        }
        case 'link': {
          const href = child.getAttribute('href');
          if (out.canonical === undefined && href !== undefined && (child.getAttribute('rel') ?? '').toLowerCase().split(/\s+/).includes('canonical')) out.canonical = href;
          break;
        }
        case 'meta': {
          if ((child.getAttribute('name') ?? '').toLowerCase() !== 'robots') break;
          const content = (child.getAttribute('content') ?? '').toLowerCase();
          if (/\b(noindex|none)\b/.test(content)) out.noindex = true;
          if (/\b(nofollow|none)\b/.test(content)) out.nofollow = true;
          break;
        }
        case 'base':
          if (out.base === undefined) out.base = child.getAttribute('href');
          break;
        case 'title':
          out.title ??= child;
          break;
        case 'h1':
          out.h1 ??= child;
          break;
        case 'body':
          if (!out.body) {
            out.body = child;
            childInBody = true;
          }
          break;
        default:
      }
      if (tag === 'main' || tag === 'article' || child.getAttribute('role') === 'main') inner.push({ el: child, tag, inBody });
      walk(child, childInBody);
    }
  };
  walk(root, false);
  for (const { el, tag, inBody } of inner) {
    if (out.body && !inBody) continue;
    if (tag === 'main') out.main ??= el;
    if (el.getAttribute('role') === 'main') out.roleMain ??= el;
    if (tag === 'article') {
      out.articles += 1;
      out.article ??= el;
    }
  }
  return out;
}
