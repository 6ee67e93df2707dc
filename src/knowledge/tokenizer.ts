import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';

let encoder: Tiktoken | undefined;
let pieces: RegExp | undefined;
/** Token counts of pre-tokenizer pieces (words with their leading space, punctuation runs, …). */
const cache = new Map<string, number>();
const CACHE_LIMIT = 200_000;

/**
 * The cl100k_base BPE (the encoding of OpenAI's text-embedding-3 models, so chunk sizes are what an
 * embedder will see). The ranks ship inside the package: nothing is fetched at run time. Built on first
 * use (about half a second), then shared by the process.
 */
export function tokenizer(): Tiktoken {
  encoder ??= new Tiktoken(cl100k);
  return encoder;
}

/** Tokens of `text`, with text that looks like a special token (`<|endoftext|>`) encoded as plain text. */
export function encode(text: string): number[] {
  return tokenizer().encode(text, [], []);
}

/**
 * Number of tokens of `text`, exactly `encode(text).length`. BPE runs on each piece of the encoding's
 * pre-tokenizer pattern independently, so the count is the sum over pieces; caching per piece makes
 * natural-language text (where pieces repeat) several times faster to count than encoding it.
 */
export function countTokens(text: string): number {
  if (text.length === 0) return 0;
  const bpe = tokenizer();
  pieces ??= new RegExp(cl100k.pat_str, 'gu');
  let total = 0;
  for (const match of text.matchAll(pieces)) {
    const piece = match[0];
    let n = cache.get(piece);
    if (n === undefined) {
      n = bpe.encode(piece, [], []).length;
      if (cache.size >= CACHE_LIMIT) cache.clear();
      cache.set(piece, n);
    }
    total += n;
  }
  return total;
}

export const TOKENIZER_NAME = 'cl100k_base';
