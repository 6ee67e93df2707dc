import { createHash } from 'node:crypto';
import { loadUndici } from '../../net/undici.js';
import { countFeatures } from './text-features.js';

/** Turns chunk texts into vectors. `model` is stored with each vector: vectors of different models are never mixed. */
export interface Embedder {
  readonly model: string;
  /** Texts per call the embedder handles well. */
  readonly batchSize: number;
  embed(texts: string[], signal?: AbortSignal): Promise<number[][]>;
}

export class EmbeddingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddingError';
  }
}

/**
 * A deterministic embedder that needs no network: the text's lowercased words and adjacent word pairs are
 * hashed (FNV-1a) into `dimensions` buckets with a ±1 sign taken from the hash (the hashing trick), weighted
 * 1 + log(count), and the vector is L2-normalised, so cosine similarity reflects shared vocabulary. Not
 * semantic, but stable, free and fast; an OpenAI-compatible endpoint replaces it when configured.
 */
export class LocalEmbedder implements Embedder {
  readonly model: string;
  readonly batchSize = 256;

  constructor(private readonly dimensions = 256) {
    this.model = `local-hash-${dimensions}`;
  }

  embedOne(text: string): number[] {
    const counts = countFeatures(text);
    const vector = new Array<number>(this.dimensions).fill(0);
    for (let i = 0; i < counts.size; i += 1) {
      const feature = counts.feature(i);
      const sign = feature & 0x80000000 ? -1 : 1;
      vector[(feature & 0x7fffffff) % this.dimensions] += sign * (1 + Math.log(counts.count(i)));
    }
    const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
    return norm > 0 ? vector.map((v) => v / norm) : vector;
  }

  async embed(texts: string[]): Promise<number[][]> {
    return texts.map((text) => this.embedOne(text));
  }
}

export interface RemoteEmbedderOptions {
  /** The embeddings endpoint itself, e.g. https://api.openai.com/v1/embeddings. */
  url: string;
  apiKey?: string;
  model: string;
  timeoutMs: number;
  attempts?: number;
}

/**
 * An OpenAI-compatible embeddings endpoint (POST {model, input: [...]} → {data: [{index, embedding}]}).
 * The URL is the operator's configuration, not user input, so it is called directly (no SSRF guard).
 * 429 and 5xx answers and network errors are retried with a short backoff; anything else fails at once.
 */
export class RemoteEmbedder implements Embedder {
  readonly model: string;
  readonly batchSize = 64;

  constructor(private readonly opts: RemoteEmbedderOptions) {
    this.model = `remote:${opts.model}`;
  }

  async embed(texts: string[], signal?: AbortSignal): Promise<number[][]> {
    const attempts = this.opts.attempts ?? 3;
    let last: unknown;
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      try {
        return await this.once(texts, signal);
      } catch (error) {
        if (signal?.aborted || (error instanceof EmbeddingError && !/HTTP (429|5\d\d)/.test(error.message))) throw error;
        last = error;
        if (attempt < attempts) await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
      }
    }
    throw last instanceof EmbeddingError ? last : new EmbeddingError(`embeddings endpoint unreachable: ${(last as Error)?.message ?? last}`);
  }

  private async once(texts: string[], signal?: AbortSignal): Promise<number[][]> {
    const deadline = AbortSignal.timeout(this.opts.timeoutMs);
    const { request } = await loadUndici();
    const res = await request(this.opts.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}) },
      body: JSON.stringify({ model: this.opts.model, input: texts }),
      signal: signal ? AbortSignal.any([signal, deadline]) : deadline,
    });
    const text = await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300) throw new EmbeddingError(`embeddings endpoint answered HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
    let parsed: { data?: Array<{ index?: number; embedding?: unknown }> };
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new EmbeddingError('embeddings endpoint answered with invalid JSON');
    }
    const data = parsed.data ?? [];
    const out: number[][] = new Array(texts.length);
    for (const [position, item] of data.entries()) {
      const index = typeof item.index === 'number' ? item.index : position;
      if (!Array.isArray(item.embedding) || !item.embedding.every((v) => typeof v === 'number')) {
        throw new EmbeddingError('embeddings endpoint answered without numeric embeddings');
      }
      out[index] = item.embedding as number[];
    }
    if (out.filter(Boolean).length !== texts.length) throw new EmbeddingError(`embeddings endpoint returned ${data.length} vectors for ${texts.length} texts`);
    return out;
  }
}

/** A fingerprint of a text for "did this page change". */
export function contentHash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
