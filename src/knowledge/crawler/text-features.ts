const WORD = /[\p{L}\p{N}]+/gu;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const PAIR_SEED = 0x5bd1e995;
/** Slots of the feature table to begin with: a chunk of ~500 tokens has fewer than half as many features. */
const SLOTS = 2048;

/** FNV-1a (32 bit) of a string's UTF-16 code units, from `seed`. */
function fnv1a(text: string, seed: number): number {
  let hash = seed >>> 0;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, FNV_PRIME);
  }
  return hash >>> 0;
}

/**
 * How often each feature (a uint32) occurs, in the order features first occur: an open-addressing table over
 * typed arrays, reused from text to text (no Map entry per feature).
 */
class FeatureCounts {
  size = 0;
  private keys = new Uint32Array(SLOTS);
  /** Index into the order + 1; 0 is an empty slot. */
  private slots = new Int32Array(SLOTS);
  private order = new Uint32Array(SLOTS / 2);
  private counts = new Uint32Array(SLOTS / 2);

  /** Empties the table; one grown for a long text goes back to its first size. */
  reset(): this {
    if (this.slots.length > SLOTS) {
      this.keys = new Uint32Array(SLOTS);
      this.slots = new Int32Array(SLOTS);
      this.order = new Uint32Array(SLOTS / 2);
      this.counts = new Uint32Array(SLOTS / 2);
    } else this.slots.fill(0);
    this.size = 0;
    return this;
  }

  add(feature: number): void {
    let mask = this.slots.length - 1;
    let slot = (Math.imul(feature, 0x9e3779b1) >>> 0) & mask;
    for (;;) {
      const entry = this.slots[slot];
      if (entry === 0) break;
      if (this.keys[slot] === feature) {
        this.counts[entry - 1] += 1;
        return;
      }
      slot = (slot + 1) & mask;
    }
    if ((this.size + 1) * 2 > this.slots.length) {
      this.grow();
      mask = this.slots.length - 1;
      slot = (Math.imul(feature, 0x9e3779b1) >>> 0) & mask;
      while (this.slots[slot] !== 0) slot = (slot + 1) & mask;
    }
    this.keys[slot] = feature;
    this.slots[slot] = this.size + 1;
    this.order[this.size] = feature;
    this.counts[this.size] = 1;
    this.size += 1;
  }

  feature(i: number): number {
    return this.order[i];
  }

  count(i: number): number {
    return this.counts[i];
  }

  private grow(): void {
    const order = new Uint32Array(this.order.length * 2);
    order.set(this.order);
    const counts = new Uint32Array(this.counts.length * 2);
    counts.set(this.counts);
    this.order = order;
    this.counts = counts;
    this.keys = new Uint32Array(this.slots.length * 2);
    this.slots = new Int32Array(this.slots.length * 2);
    const mask = this.slots.length - 1;
    for (let i = 0; i < this.size; i += 1) {
      let slot = (Math.imul(this.order[i], 0x9e3779b1) >>> 0) & mask;
      while (this.slots[slot] !== 0) slot = (slot + 1) & mask;
      this.keys[slot] = this.order[i];
      this.slots[slot] = i + 1;
    }
  }
}

const scratch = new FeatureCounts();

/**
 * The local embedder's features of a text: each lowercased word ([\p{L}\p{N}]+) hashed from FNV's offset, and
 * each word after the first hashed again from the previous word's hash (the pair), counted in order of first
 * occurrence. The result is reused by the next call.
 */
export function countFeatures(text: string): FeatureCounts {
  return asciiFeatures(text, scratch.reset()) ?? anyFeatures(text, scratch.reset());
}

function anyFeatures(text: string, counts: FeatureCounts): FeatureCounts {
  let previous = 0;
  for (const match of text.toLowerCase().matchAll(WORD)) {
    const word = fnv1a(match[0], FNV_OFFSET);
    counts.add(word);
    if (previous !== 0) counts.add(fnv1a(match[0], previous ^ PAIR_SEED));
    previous = word || 1;
  }
  return counts;
}

/**
 * The same for a text that is all ASCII, where a word is [a-z0-9]+ after lowercasing: one pass over the
 * characters, without the lowercased copy and a string per word (most crawled text is ASCII). Undefined at
 * the first non-ASCII character.
 */
function asciiFeatures(text: string, counts: FeatureCounts): FeatureCounts | undefined {
  let previous = 0;
  let word = 0;
  let pair = 0;
  let inWord = false;
  for (let i = 0; i <= text.length; i += 1) {
    let c = i < text.length ? text.charCodeAt(i) : 0x20;
    if (c >= 0x80) return undefined;
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    else if (!((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39))) {
      if (!inWord) continue;
      word >>>= 0;
      counts.add(word);
      if (previous !== 0) counts.add(pair >>> 0);
      previous = word || 1;
      inWord = false;
      continue;
    }
    if (!inWord) {
      inWord = true;
      word = FNV_OFFSET;
      pair = (previous ^ PAIR_SEED) >>> 0;
    }
    word = Math.imul(word ^ c, FNV_PRIME);
    pair = Math.imul(pair ^ c, FNV_PRIME);
  }
  return counts;
}

export type { FeatureCounts };
