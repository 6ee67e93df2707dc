import { countTokens, encode, tokenizer } from './tokenizer.js';

/** Target size of a chunk in tokens; a chunk may go a few tokens over through separators. */
export const CHUNK_TOKENS = 500;
/** At most this many tokens of the previous chunk's tail (whole paragraphs or sentences) start the next one. */
export const OVERLAP_TOKENS = 60;
/** A heading starts a new chunk once the current one holds at least this many tokens (tiny sections merge). */
const MIN_TOKENS_BEFORE_HEADING = 100;

export interface Chunk {
  text: string;
  tokens: number;
}

interface Piece {
  text: string;
  tokens: number;
  /** How this piece joins the one before it: a paragraph break or a space inside a long paragraph. */
  sep: '\n\n' | ' ';
  heading: boolean;
}

const HEADING = /^#{1,6}\s/;

/** Paragraphs and headings: blank lines separate blocks, and a Markdown heading line is a block of its own. */
export function splitBlocks(text: string): Array<{ text: string; heading: boolean }> {
  const normalized = text.replace(/\r\n?/g, '\n').replace(/[ \t]+\n/g, '\n');
  const blocks: Array<{ text: string; heading: boolean }> = [];
  for (const paragraph of normalized.split(/\n[ \t]*\n+/)) {
    let lines: string[] = [];
    const flush = () => {
      const joined = lines.join('\n').trim();
      if (joined) blocks.push({ text: joined, heading: false });
      lines = [];
    };
    for (const line of paragraph.split('\n')) {
      if (HEADING.test(line.trim())) {
        flush();
        blocks.push({ text: line.trim(), heading: true });
      } else lines.push(line);
    }
    flush();
  }
  return blocks;
}

/** Sentences of a long paragraph (a sentence ends at . ! ? or a line break). */
function sentences(text: string): string[] {
  return text.split(/(?<=[.!?])\s+|\n+/).map((s) => s.trim()).filter(Boolean);
}

/** Cuts text with no sentence breaks into token windows, never inside a multi-byte character. */
function hardSplit(text: string, max: number): string[] {
  const tokens = encode(text);
  const out: string[] = [];
  let start = 0;
  while (start < tokens.length) {
    let end = Math.min(tokens.length, start + max);
    let piece = tokenizer().decode(tokens.slice(start, end));
    for (let back = 0; back < 3 && end < tokens.length && piece.endsWith('\uFFFD'); back += 1) {
      end -= 1;
      piece = tokenizer().decode(tokens.slice(start, end));
    }
    out.push(piece);
    start = end;
  }
  return out.map((p) => p.trim()).filter(Boolean);
}

/**
 * Long texts take a while to count; handing the event loop back every few milliseconds keeps a worker that
 * shares its process with the API responsive.
 */
function yielder(sliceMs = 20): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await new Promise((resolve) => setImmediate(resolve));
    since = performance.now();
  };
}

/** Blocks as pieces no larger than a chunk: long paragraphs split into sentences, huge sentences into windows. */
async function toPieces(blocks: Array<{ text: string; heading: boolean }>, pause: () => Promise<void>): Promise<Piece[]> {
  const pieces: Piece[] = [];
  for (const block of blocks) {
    await pause();
    const tokens = countTokens(block.text);
    if (tokens <= CHUNK_TOKENS) {
      pieces.push({ text: block.text, tokens, sep: '\n\n', heading: block.heading });
      continue;
    }
    let first = true;
    for (const sentence of sentences(block.text)) {
      const sentenceTokens = countTokens(sentence);
      const parts = sentenceTokens <= CHUNK_TOKENS ? [sentence] : hardSplit(sentence, CHUNK_TOKENS);
      for (const part of parts) {
        pieces.push({ text: part, tokens: parts.length === 1 ? sentenceTokens : countTokens(part), sep: first ? '\n\n' : ' ', heading: false });
        first = false;
      }
    }
  }
  return pieces;
}

/** The tail of a closed chunk that the next chunk repeats: whole pieces, or the last sentences of the last piece. */
function overlapOf(pieces: Piece[]): Piece[] {
  const tail: Piece[] = [];
  let total = 0;
  for (let i = pieces.length - 1; i >= 0; i -= 1) {
    if (pieces[i].heading || total + pieces[i].tokens > OVERLAP_TOKENS) break;
    tail.unshift(pieces[i]);
    total += pieces[i].tokens;
  }
  if (tail.length > 0 || pieces.length === 0) return tail;
  const last = pieces[pieces.length - 1];
  const picked: string[] = [];
  for (const sentence of sentences(last.text).reverse()) {
    const tokens = countTokens(sentence);
    if (total + tokens > OVERLAP_TOKENS) break;
    picked.unshift(sentence);
    total += tokens;
  }
  return picked.length > 0 ? [{ text: picked.join(' '), tokens: total, sep: '\n\n', heading: false }] : [];
}

function join(pieces: Piece[]): string {
  return pieces.map((p, i) => (i === 0 ? p.text : `${p.sep}${p.text}`)).join('');
}

/**
 * Splits text into chunks of about CHUNK_TOKENS tokens on heading and paragraph boundaries (sentence
 * boundaries inside paragraphs longer than a chunk). Consecutive chunks overlap by up to OVERLAP_TOKENS
 * tokens of whole paragraphs or sentences, except where a new section (heading) begins. Each chunk's
 * `tokens` is the tokenizer's count of exactly its text.
 */
export async function chunkText(text: string): Promise<Chunk[]> {
  const pause = yielder();
  const pieces = await toPieces(splitBlocks(text), pause);
  const chunks: Chunk[] = [];
  let current: Piece[] = [];
  let size = 0;
  const close = () => {
    const body = join(current);
    chunks.push({ text: body, tokens: countTokens(body) });
  };
  for (const piece of pieces) {
    await pause();
    const cost = piece.tokens + 1;
    if (current.length > 0 && (size + cost > CHUNK_TOKENS || (piece.heading && size >= MIN_TOKENS_BEFORE_HEADING))) {
      close();
      current = piece.heading ? [] : overlapOf(current);
      size = current.reduce((sum, p) => sum + p.tokens + 1, 0);
      // An overlap that would push the next piece past the target is dropped rather than left alone in a chunk.
      if (size + cost > CHUNK_TOKENS) {
        current = [];
        size = 0;
      }
    }
    current.push(current.length === 0 ? { ...piece, sep: '\n\n' } : piece);
    size += cost;
  }
  if (current.length > 0) close();
  return chunks;
}

/** The first characters of a text on one line, for the inventory's `preview`. */
export function previewOf(text: string, max = 200): string | null {
  // Only the start of the text is flattened: as much as gives more than `max` characters, or all of it.
  for (let take = 2 * max + 64; ; take *= 2) {
    const whole = take >= text.length;
    const flat = (whole ? text : text.slice(0, take)).replace(/\s+/g, ' ').trim();
    if (flat.length > max) return `${flat.slice(0, max - 1).trimEnd()}…`;
    if (whole) return flat || null;
  }
}
