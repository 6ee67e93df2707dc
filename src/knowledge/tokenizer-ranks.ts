// The cl100k_base rank file of the BPE tokenizer (tokenizer.ts): where it comes from and how it is decoded.
import { createRequire } from 'node:module';

/** js-tiktoken's rank file: `bpe_ranks` is "! <first rank> <base64 token> <base64 token> …" (one line per run). */
export interface RankFile {
  pat_str: string;
  special_tokens: Record<string, number>;
  bpe_ranks: string;
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Decodes the base64 tokens of a rank file into one byte buffer, in rank order (missing ranks are empty). */
export function parseRanks(text: string): { first: number; bytes: Uint8Array; starts: Uint32Array } {
  const digit = new Int8Array(128).fill(-1);
  for (let k = 0; k < BASE64.length; k += 1) digit[BASE64.charCodeAt(k)] = k;
  const lines = text.split('\n').filter(Boolean).map((line) => {
    const a = line.indexOf(' ');
    const b = a < 0 ? -1 : line.indexOf(' ', a + 1);
    const offset = Number(line.slice(a + 1, b));
    if (b < 0 || !Number.isInteger(offset)) throw new Error('tokenizer: unreadable rank file');
    const tokens = line.slice(b + 1);
    return { line: tokens, offset, count: tokens.length > 0 ? tokens.split(' ').length : 0 };
  });
  lines.sort((x, y) => x.offset - y.offset);
  if (lines.length === 0) throw new Error('tokenizer: empty rank file');
  const first = lines[0].offset;
  const last = lines[lines.length - 1];
  const size = last.offset + last.count - first;
  const bytes = new Uint8Array(Math.ceil(text.length * 0.75));
  const starts = new Uint32Array(size + 1);
  let at = 0;
  let rank = 0;
  for (const { line, offset } of lines) {
    if (offset - first < rank) throw new Error('tokenizer: overlapping ranks');
    while (rank < offset - first) starts[++rank] = at;
    let acc = 0;
    let bits = 0;
    for (let k = 0; k <= line.length; k += 1) {
      const c = k < line.length ? line.charCodeAt(k) : 32;
      if (c === 32) {
        starts[++rank] = at;
        acc = 0;
        bits = 0;
      } else if (c !== 61) {
        const d = c < 128 ? digit[c] : -1;
        if (d < 0) throw new Error('tokenizer: unreadable rank file');
        acc = ((acc << 6) | d) & 0xfff;
        bits += 6;
        if (bits >= 8) {
          bits -= 8;
          bytes[at++] = (acc >> bits) & 0xff;
        }
      }
    }
  }
  return { first, bytes: bytes.slice(0, at), starts };
}

/** js-tiktoken's cl100k_base rank file (loaded on first use: processes that never count tokens don't pay). */
export function cl100kRanks(): RankFile {
  const file = createRequire(import.meta.url)('js-tiktoken/ranks/cl100k_base') as RankFile;
  if (typeof file.bpe_ranks !== 'string' || typeof file.pat_str !== 'string') throw new Error('tokenizer: unexpected rank file');
  return file;
}
