import { cl100kRanks, parseRanks, type RankFile } from './tokenizer-ranks.js';

/** Rank of "no such token" (above every real rank, so it never wins a merge). */
const NONE = 0x7fffffff;
/** Pieces longer than this (in bytes) merge through a heap, in O(n log n) rather than O(n²). */
const LONG_PIECE = 128;
const TWO_32 = 4294967296;

/**
 * Byte-pair encoding over a compact rank table: every token's bytes in one buffer (in rank order), an
 * offsets array, an open-addressing hash from bytes to rank and a direct table for two-byte tokens (the
 * first merges of every piece): a few flat arrays, where js-tiktoken's `Tiktoken` keeps a string-keyed Map and
 * a Map of 100k small Uint8Arrays for the whole life of the process.
 *
 * The merge is tiktoken's: split the piece into bytes, then repeatedly merge the adjacent pair with the
 * lowest rank (the leftmost on ties) until no pair is a token.
 */
export class BpeTokenizer {
  private readonly first: number;
  private readonly size: number;
  private readonly bytes: Uint8Array;
  private readonly starts: Uint32Array;
  private readonly table: Int32Array;
  private readonly mask: number;
  private readonly pairs = new Int32Array(65536).fill(NONE);
  private readonly special = new Map<number, Uint8Array>();
  private readonly pieces: RegExp;
  /** The pattern is cl100k's, which `asciiPieceEnd` implements for ASCII text. */
  private readonly asciiScanner: boolean;
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder('utf-8');
  private buf = new Uint8Array(1024);
  private pos = new Int32Array(LONG_PIECE + 2);
  private rk = new Int32Array(LONG_PIECE + 2);

  constructor(file: RankFile) {
    this.pieces = new RegExp(file.pat_str, 'gu');
    this.asciiScanner = file.pat_str === CL100K_PATTERN;
    const parsed = parseRanks(file.bpe_ranks);
    this.first = parsed.first;
    this.bytes = parsed.bytes;
    this.starts = parsed.starts;
    this.size = parsed.starts.length - 1;
    let capacity = 1024;
    while (capacity < this.size * 2) capacity *= 2;
    this.table = new Int32Array(capacity);
    this.mask = capacity - 1;
    for (let r = 0; r < this.size; r += 1) {
      const start = this.starts[r];
      const end = this.starts[r + 1];
      if (end === start) continue;
      let slot = hash(this.bytes, start, end) & this.mask;
      while (this.table[slot] !== 0) slot = (slot + 1) & this.mask;
      this.table[slot] = r + 1;
      if (end - start === 2) this.pairs[(this.bytes[start] << 8) | this.bytes[start + 1]] = r + this.first;
    }
    for (const [text, rank] of Object.entries(file.special_tokens)) this.special.set(rank, this.encoder.encode(text));
  }

  /** Tokens of `text`; text that looks like a special token (`<|endoftext|>`) is encoded as plain text. */
  encode(text: string): number[] {
    const out: number[] = [];
    for (const match of text.matchAll(this.pieces)) {
      const n = this.utf8(match[0]);
      const whole = this.rank(this.buf, 0, n);
      if (whole !== NONE) {
        out.push(whole);
        continue;
      }
      const parts = this.merge(n);
      for (let k = 0; k < parts; k += 1) {
        const rank = this.rank(this.buf, this.pos[k], this.pos[k + 1]);
        if (rank !== NONE) out.push(rank);
      }
    }
    this.shrink();
    return out;
  }

  /** `encode(text).length`, without building the array. */
  count(text: string): number {
    let total = 0;
    if (!this.asciiScanner || NON_ASCII.test(text)) {
      for (const match of text.matchAll(this.pieces)) total += this.countPiece(this.utf8(match[0]));
    } else {
      for (let start = 0; start < text.length; ) {
        const end = asciiPieceEnd(text, start);
        if (this.buf.length < end - start) this.buf = new Uint8Array(end - start + 1024);
        for (let k = start; k < end; k += 1) this.buf[k - start] = text.charCodeAt(k);
        total += this.countPiece(end - start);
        start = end;
      }
    }
    this.shrink();
    return total;
  }

  /** Tokens of the piece whose bytes are `this.buf[0..n)`. */
  private countPiece(n: number): number {
    if (n === 0) return 0;
    return this.rank(this.buf, 0, n) !== NONE ? 1 : this.merge(n);
  }

  /** The text of `tokens` (bytes that do not form whole UTF-8 characters become U+FFFD). */
  decode(tokens: readonly number[]): string {
    let length = 0;
    for (const token of tokens) length += this.tokenBytes(token)?.length ?? 0;
    const out = new Uint8Array(length);
    let at = 0;
    for (const token of tokens) {
      const bytes = this.tokenBytes(token);
      if (bytes === undefined) continue;
      out.set(bytes, at);
      at += bytes.length;
    }
    return this.decoder.decode(out);
  }

  /** Scratch space grown for a huge piece (a long run of one character) is not kept. */
  private shrink(): void {
    if (this.buf.length > 65536) this.buf = new Uint8Array(1024);
    if (this.pos.length > 65536) this.pos = new Int32Array(LONG_PIECE + 2);
  }

  private tokenBytes(token: number): Uint8Array | undefined {
    const r = token - this.first;
    if (r >= 0 && r < this.size && this.starts[r + 1] > this.starts[r]) return this.bytes.subarray(this.starts[r], this.starts[r + 1]);
    return this.special.get(token);
  }

  /** Writes the UTF-8 of `piece` to `this.buf` and returns its length. */
  private utf8(piece: string): number {
    const n = piece.length;
    if (this.buf.length < n * 3) this.buf = new Uint8Array(n * 3 + 1024);
    const buf = this.buf;
    for (let k = 0; k < n; k += 1) {
      const c = piece.charCodeAt(k);
      if (c >= 0x80) return this.encoder.encodeInto(piece, buf).written;
      buf[k] = c;
    }
    return n;
  }

  /** Rank of the token whose bytes are `b[from..to)`, or NONE. */
  private rank(b: Uint8Array, from: number, to: number): number {
    const len = to - from;
    const bytes = this.bytes;
    const starts = this.starts;
    let slot = hash(b, from, to) & this.mask;
    for (;;) {
      const entry = this.table[slot];
      if (entry === 0) return NONE;
      const start = starts[entry - 1];
      if (starts[entry] - start === len) {
        let k = 0;
        while (k < len && bytes[start + k] === b[from + k]) k += 1;
        if (k === len) return entry - 1 + this.first;
      }
      slot = (slot + 1) & this.mask;
    }
  }

  /** BPE of `this.buf[0..n)`: leaves the part boundaries in `this.pos[0..parts]` and returns the number of parts. */
  private merge(n: number): number {
    if (n > LONG_PIECE) return this.mergeLong(n);
    const b = this.buf;
    const pos = this.pos;
    const rk = this.rk;
    // rk[k] is the rank of parts k and k+1 merged; the last two entries have no pair.
    for (let k = 0; k <= n; k += 1) pos[k] = k;
    for (let k = 0; k < n - 1; k += 1) rk[k] = this.pairs[(b[k] << 8) | b[k + 1]];
    rk[n - 1] = NONE;
    rk[n] = NONE;
    let len = n + 1;
    for (;;) {
      let min = NONE;
      let at = -1;
      for (let k = 0; k < len - 1; k += 1) {
        if (rk[k] < min) {
          min = rk[k];
          at = k;
        }
      }
      if (at < 0) break;
      if (at > 0) rk[at - 1] = at + 2 < len ? this.rank(b, pos[at - 1], pos[at + 2]) : NONE;
      rk[at] = at + 3 < len ? this.rank(b, pos[at], pos[at + 3]) : NONE;
      len -= 1;
      for (let k = at + 1; k < len; k += 1) {
        pos[k] = pos[k + 1];
        rk[k] = rk[k + 1];
      }
    }
    return len - 1;
  }

  /**
   * The same merges for a long piece: parts form a linked list (keyed by their start offset) and candidate
   * pairs wait in a min-heap ordered by (rank, start), so the lowest rank, leftmost first, still merges
   * first. Entries made stale by an earlier merge are skipped when popped.
   */
  private mergeLong(n: number): number {
    const b = this.buf;
    const next = new Int32Array(n + 1);
    const prev = new Int32Array(n + 1);
    const current = new Int32Array(n + 1);
    let heap = new Float64Array(n);
    let heapSize = 0;
    const offer = (p: number) => {
      const q = next[p];
      const rank = q < n ? this.rank(b, p, next[q]) : NONE;
      current[p] = rank;
      if (rank === NONE) return;
      if (heapSize === heap.length) {
        const grown = new Float64Array(heap.length * 2);
        grown.set(heap);
        heap = grown;
      }
      const key = rank * TWO_32 + p;
      let k = heapSize;
      heapSize += 1;
      while (k > 0) {
        const parent = (k - 1) >> 1;
        if (heap[parent] <= key) break;
        heap[k] = heap[parent];
        k = parent;
      }
      heap[k] = key;
    };
    for (let k = 0; k <= n; k += 1) {
      next[k] = k + 1;
      prev[k] = k - 1;
      current[k] = NONE;
    }
    for (let k = 0; k < n - 1; k += 1) offer(k);
    let parts = n;
    while (heapSize > 0) {
      const top = heap[0];
      heapSize -= 1;
      const last = heap[heapSize];
      let k = 0;
      for (;;) {
        let child = 2 * k + 1;
        if (child >= heapSize) break;
        if (child + 1 < heapSize && heap[child + 1] < heap[child]) child += 1;
        if (heap[child] >= last) break;
        heap[k] = heap[child];
        k = child;
      }
      heap[k] = last;
      const rank = Math.floor(top / TWO_32);
      const p = top - rank * TWO_32;
      if (current[p] !== rank) continue;
      const q = next[p];
      next[p] = next[q];
      if (next[q] <= n) prev[next[q]] = p;
      current[q] = -1;
      parts -= 1;
      offer(p);
      if (prev[p] >= 0) offer(prev[p]);
    }
    if (this.pos.length < parts + 1) this.pos = new Int32Array(parts + 1);
    let k = 0;
    for (let p = 0; p < n; p = next[p]) this.pos[k++] = p;
    this.pos[k] = n;
    return parts;
  }
}

/** FNV-1a of `b[from..to)`. */
function hash(b: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let k = from; k < to; k += 1) h = Math.imul(h ^ b[k], 0x01000193);
  return h >>> 0;
}

const NON_ASCII = /[\u0080-\uffff]/;
const CL100K_PATTERN = String.raw`('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

/** ASCII character classes of that pattern: letter, digit, JavaScript's \s, and none of these (punctuation, controls). */
const LETTER = 1;
const DIGIT = 2;
const SPACE = 3;
const OTHER = 4;
const ASCII_CLASS = new Uint8Array(128).map((_, c) =>
  (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) ? LETTER : c >= 0x30 && c <= 0x39 ? DIGIT : c === 0x20 || (c >= 0x09 && c <= 0x0d) ? SPACE : OTHER,
);
const CONTRACTIONS = ['s', 't', 're', 've', 'm', 'll', 'd'];
const isNewline = (c: number) => c === 0x0a || c === 0x0d;

/** The end of the run of characters of class `kind` from `from`. */
function runEnd(text: string, from: number, kind: number): number {
  let i = from;
  while (i < text.length && ASCII_CLASS[text.charCodeAt(i)] === kind) i += 1;
  return i;
}

/**
 * Where the piece of CL100K_PATTERN that starts at `start` ends, for ASCII text: its alternatives tried in
 * order, without a match object and a string per piece.
 */
export function asciiPieceEnd(text: string, start: number): number {
  const n = text.length;
  const c = text.charCodeAt(start);
  const kind = ASCII_CLASS[c];
  const next = start + 1 < n ? ASCII_CLASS[text.charCodeAt(start + 1)] : 0;
  // 's 't 're 've 'm 'll 'd, any case
  if (c === 0x27 && next === LETTER) {
    for (const tail of CONTRACTIONS) {
      if (text.slice(start + 1, start + 1 + tail.length).toLowerCase() === tail) return start + 1 + tail.length;
    }
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (kind === LETTER) return runEnd(text, start, LETTER);
  if (kind !== DIGIT && !isNewline(c) && next === LETTER) return runEnd(text, start + 1, LETTER);
  // \p{N}{1,3}
  if (kind === DIGIT) return Math.min(runEnd(text, start, DIGIT), start + 3);
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  if (kind === OTHER || (c === 0x20 && next === OTHER)) {
    let end = runEnd(text, kind === OTHER ? start : start + 1, OTHER);
    while (end < n && isNewline(text.charCodeAt(end))) end += 1;
    return end;
  }
  // \s*[\r\n]+ : up to the run's last line break
  const spaces = runEnd(text, start, SPACE);
  for (let i = spaces - 1; i >= start; i -= 1) if (isNewline(text.charCodeAt(i))) return i + 1;
  // \s+(?!\S) leaves the space before a word to it; \s+ is a lone space before one
  return spaces === n || spaces - start < 2 ? spaces : spaces - 1;
}

let instance: BpeTokenizer | undefined;

/**
 * The cl100k_base BPE (the encoding of OpenAI's text-embedding-3 models, so chunk sizes are what an
 * embedder will see). The ranks ship inside the js-tiktoken package: nothing is fetched at run time.
 * Built on first use, then shared by the process.
 */
export function tokenizer(): BpeTokenizer {
  instance ??= new BpeTokenizer(cl100kRanks());
  return instance;
}

/** Tokens of `text`, with text that looks like a special token (`<|endoftext|>`) encoded as plain text. */
export function encode(text: string): number[] {
  return tokenizer().encode(text);
}

/**
 * Number of tokens of `text`, exactly `encode(text).length`. BPE runs on each piece of the encoding's
 * pre-tokenizer pattern independently; a piece that is a token itself (most words) is one hash lookup.
 */
export function countTokens(text: string): number {
  if (text.length === 0) return 0;
  return tokenizer().count(text);
}

export const TOKENIZER_NAME = 'cl100k_base';
