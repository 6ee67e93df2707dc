import { fileTypeFromBuffer } from 'file-type';
import { parse } from 'node-html-parser';
import { htmlText } from './html-text.js';

export type Format = 'text' | 'markdown' | 'html' | 'pdf' | 'docx';

/** Why text could not be extracted. `permanent` failures are recorded on the source; others are retried. */
export class ExtractionError extends Error {
  constructor(
    message: string,
    readonly permanent = true,
  ) {
    super(message);
    this.name = 'ExtractionError';
  }
}

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

/** The media type without parameters, lowercased (`Text/HTML; charset=utf-8` → `text/html`). */
export function baseType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0].trim().toLowerCase();
}

/** Valid UTF-8 without NUL bytes: what text formats must be. */
export function isUtf8Text(bytes: Buffer): boolean {
  if (bytes.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * What the bytes really are, for ingestion. Binary formats are sniffed from their bytes (the declared type
 * is never trusted); text formats must be valid UTF-8 and are told apart by the declared type. A declared
 * type that contradicts the bytes is refused; `application/octet-stream` means "unknown, look".
 */
export async function detectFormat(bytes: Buffer, declared: string | undefined, filename?: string): Promise<Format> {
  const type = baseType(declared);
  const sniffed = await fileTypeFromBuffer(bytes);
  if (sniffed) {
    const real = sniffed.mime === DOCX ? 'docx' : sniffed.mime === 'application/pdf' ? 'pdf' : undefined;
    if (!real) throw new ExtractionError(`unsupported file: the bytes are ${sniffed.mime}; text, Markdown, HTML, PDF and DOCX can be ingested`);
    const expected = real === 'pdf' ? 'application/pdf' : DOCX;
    if (type && type !== expected && type !== 'application/octet-stream') {
      throw new ExtractionError(`declared ${type}, but the bytes are ${sniffed.mime}`);
    }
    return real;
  }
  if (type === 'application/pdf' || type === DOCX) throw new ExtractionError(`declared ${type}, but the bytes are not a ${type === DOCX ? 'DOCX' : 'PDF'} file`);
  if (!isUtf8Text(bytes)) throw new ExtractionError('unsupported file: the bytes are neither a known document format nor UTF-8 text');
  if (type === 'text/html' || type === 'application/xhtml+xml') return 'html';
  if (type === 'text/markdown' || type === 'text/x-markdown' || /\.(md|markdown)$/i.test(filename ?? '')) return 'markdown';
  if (type === 'text/plain' || type === 'text/csv' || type === 'application/octet-stream' || type === '') {
    return /^\s*<(!doctype html|html)[\s>]/i.test(bytes.subarray(0, 512).toString('utf8')) ? 'html' : 'text';
  }
  throw new ExtractionError(`unsupported content type ${type}; text, Markdown, HTML, PDF and DOCX can be ingested`);
}

const DROP = 'script,style,noscript,template,svg,iframe,object,canvas,nav,form,button,select,head';

/**
 * HTML to text that keeps its structure: headings become Markdown headings (so the chunker starts sections
 * there), block elements become paragraphs, list items "- " lines; scripts, styles, navigation and forms
 * are dropped. The content of <main> (or <article>) is preferred when the page has one.
 */
export function htmlToText(html: string): { text: string; title?: string } {
  const root = parse(html, { comment: false });
  const title = root.querySelector('title')?.text.replace(/\s+/g, ' ').trim() || undefined;
  for (const node of root.querySelectorAll(DROP)) node.remove();
  const scope = root.querySelector('main') ?? root.querySelector('article') ?? root.querySelector('body') ?? root;
  return { text: htmlText(scope, { keepLineBreaks: true }), title };
}

// unpdf (pdf.js) and mammoth are loaded on first use: API-only nodes never pay for them.
async function pdfToText(bytes: Buffer): Promise<string> {
  const { extractText: pdfText, getDocumentProxy } = await import('unpdf');
  let doc;
  try {
    doc = await getDocumentProxy(new Uint8Array(bytes));
  } catch (error) {
    throw new ExtractionError(`the PDF could not be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    const { text } = await pdfText(doc, { mergePages: false });
    return text.map((page) => page.trim()).filter(Boolean).join('\n\n');
  } finally {
    await doc.destroy();
  }
}

async function docxToText(bytes: Buffer): Promise<string> {
  const { default: mammoth } = await import('mammoth');
  try {
    // Headings survive as <h1>…; images are dropped (not inlined as base64) and external files never read.
    const result = await mammoth.convertToHtml(
      { buffer: bytes },
      { convertImage: mammoth.images.imgElement(async () => ({ src: '' })), externalFileAccess: false },
    );
    return htmlToText(result.value).text;
  } catch (error) {
    throw new ExtractionError(`the DOCX file could not be read: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Plain text of a document in `format`; HTML also yields its <title>. */
export async function extractText(bytes: Buffer, format: Format): Promise<{ text: string; title?: string }> {
  switch (format) {
    case 'pdf':
      return { text: await pdfToText(bytes) };
    case 'docx':
      return { text: await docxToText(bytes) };
    case 'html':
      return htmlToText(bytes.toString('utf8'));
    case 'markdown':
    case 'text':
      return { text: bytes.toString('utf8').replace(/^\uFEFF/, '') };
  }
}
