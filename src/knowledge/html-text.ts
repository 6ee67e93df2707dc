import type { HTMLElement, Node } from 'node-html-parser';

/** Elements that start and end a paragraph. */
const BLOCK = new Set([
  'p', 'div', 'section', 'article', 'main', 'header', 'footer', 'aside', 'ul', 'ol', 'li', 'table', 'thead', 'tbody', 'tfoot', 'tr',
  'blockquote', 'pre', 'hr', 'dl', 'dt', 'dd', 'figure', 'figcaption', 'address', 'details', 'summary', 'body', 'html', 'caption',
]);

/** Whitespace that collapsing (crawled pages) would change: anything but a lone space. */
const COLLAPSIBLE = /[\t\r\n\u00a0]| {2}/;

export interface HtmlTextOptions {
  /** Leaves an element and everything in it out (never asked about the scope itself). */
  skip?(el: HTMLElement, tag: string): boolean;
  /**
   * Keeps line breaks (in text and <br>) inside a paragraph (uploaded documents: addresses, poems); otherwise
   * all whitespace collapses and a <br> ends the paragraph (crawled pages, whose markup breaks lines at random).
   */
  keepLineBreaks: boolean;
}

/**
 * The one HTML-to-text walker (uploaded HTML and DOCX, crawled pages): the text of `scope` with its structure
 * kept the way the chunker expects it. Headings become Markdown headings (so sections start there), block
 * elements paragraphs, list items "- " lines, table cells space-separated.
 */
export function htmlText(scope: HTMLElement, options: HtmlTextOptions): string {
  const blocks: string[] = [];
  const spaces = options.keepLineBreaks ? /[ \t\u00a0]+/g : /[ \t\r\n\u00a0]+/g;
  let line = '';
  const flush = () => {
    if (!line) return;
    let text: string;
    if (options.keepLineBreaks) text = line.replace(spaces, ' ').replace(/ *\n */g, '\n');
    // Most paragraphs of a crawled page have single spaces only: a line is rebuilt only when it has spaces to collapse.
    else text = COLLAPSIBLE.test(line) ? line.replace(spaces, ' ') : line;
    text = text.trim();
    if (text) blocks.push(text);
    line = '';
  };
  const walk = (node: Node) => {
    if (node.nodeType === 3) {
      // Decoding entities is the walk's main cost: text without any '&' is its own decoding.
      const raw = node.rawText;
      line += raw.includes('&') ? node.text : raw;
      return;
    }
    if (node.nodeType !== 1) return;
    const el = node as HTMLElement;
    const tag = el.rawTagName ? el.rawTagName.toLowerCase() : '';
    if (el !== scope && options.skip?.(el, tag)) return;
    const heading = tag.length === 2 && tag[0] === 'h' ? Number(tag[1]) : 0;
    if (heading >= 1 && heading <= 6) {
      flush();
      const text = el.text.replace(/\s+/g, ' ').trim();
      if (text) blocks.push(`${'#'.repeat(heading)} ${text}`);
      return;
    }
    if (tag === 'br') {
      if (options.keepLineBreaks) line += '\n';
      else flush();
      return;
    }
    const block = BLOCK.has(tag);
    if (block) flush();
    if (tag === 'li') line += '- ';
    else if (tag === 'td' || tag === 'th') line += ' ';
    for (const child of el.childNodes) walk(child);
    if (block) flush();
  };
  walk(scope);
  flush();
  return blocks.join('\n\n');
}
