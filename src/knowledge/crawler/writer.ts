import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Db } from '../../db/driver.js';
import { newId } from '../../ids.js';
import { LeaseLostError } from '../../jobs/runner.js';
import { chunkText, previewOf, type Chunk } from '../chunker.js';
import type { CreatedBy } from '../repo.js';
import { crawlRepo, type CrawlCounts, type CrawlJobRow } from './crawl-repo.js';
import type { CrawledPage } from './crawler.js';
import { contentHash, type Embedder } from './embedder.js';
import { snapshotRepo, type NewPage, type ReusablePage } from './snapshot-repo.js';

export interface WriterContext {
  db: Db;
  crawlId: string;
  runnerJobId: number;
  /** The run's fence (the runner's attempt number). */
  attempt: number;
  tenantId: string;
  websiteId: string;
  generationId: string;
  propertyId: string | null;
  createdBy: CreatedBy | null;
  now: () => Date;
  /** Embeds the new chunks of each batch before it is written. */
  embedder: Embedder;
  signal: AbortSignal;
  /** Counters and failures to record with each batch. */
  status: () => { counts: CrawlCounts; failures: CrawlJobRow['failed_pages'] };
}

const BATCH_PAGES = 25;
const BATCH_MS = 1000;

/**
 * Writes crawled pages into the staging generation a batch at a time, with the job's progress, in one short
 * transaction per batch (no network I/O inside). A page whose text is unchanged since the current generation
 * copies that page's chunks and vectors; any other page is chunked and its chunks embedded here, before the
 * transaction, while the crawl goes on fetching (docs/decisions.md, "Embedding while crawling").
 */
export class SnapshotWriter {
  private pending: CrawledPage[] = [];
  private lastFlush = Date.now();
  pagesWritten = 0;
  chunksReused = 0;
  chunksEmbedded = 0;

  private readonly byHash = new Map<string, ReusablePage>();
  private readonly byId = new Map<string, ReusablePage>();

  /** `reusable`: pages of the current generation whose chunks carry vectors of this crawl's embedder. */
  constructor(
    private readonly ctx: WriterContext,
    reusable: readonly ReusablePage[],
  ) {
    for (const page of reusable) {
      this.byHash.set(page.content_hash, page);
      this.byId.set(page.id, page);
    }
  }

  /**
   * Takes a page. A full batch is written in the background while the crawl goes on (one write at a time);
   * the crawl waits only when the next batch is full before the previous one is written.
   */
  async add(page: CrawledPage): Promise<void> {
    this.pending.push(page);
    if (this.pending.length < BATCH_PAGES && Date.now() - this.lastFlush < BATCH_MS) return;
    if (this.writing) {
      if (this.pending.length < 2 * BATCH_PAGES) return;
      await this.writing;
    }
    this.throwIfFailed();
    this.writing = this.write().then(
      () => (this.writing = undefined),
      (error: unknown) => {
        this.failure = { error };
        this.writing = undefined;
      },
    );
  }

  /** Writes what is left, after the write in progress; rethrows a background write's failure. */
  async flush(): Promise<void> {
    await this.writing;
    this.throwIfFailed();
    await this.write();
  }

  private writing: Promise<void> | undefined;
  private failure: { error: unknown } | undefined;

  private throwIfFailed(): void {
    if (this.failure) throw this.failure.error;
  }

  private async write(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    this.lastFlush = Date.now();
    const pages: NewPage[] = [];
    const chunks: Array<{ sourceId: string; seq: number; text: string; tokens: number }> = [];
    const copies: Array<{ to: string; from: string }> = [];
    for (const page of batch) {
      // Chunking holds the thread: the pages fetched meanwhile are taken in between pages.
      await nextTurn();
      const id = newId('ks');
      // A 304 answer: the previous page as it was (its text was not downloaded again).
      const unchanged = page.unchangedFrom ? this.byId.get(page.unchangedFrom) : undefined;
      const hash = unchanged ? unchanged.content_hash : contentHash(page.text);
      const previous = unchanged ?? this.byHash.get(hash);
      let counts: { chunkCount: number; tokens: number };
      if (previous) {
        copies.push({ to: id, from: previous.id });
        counts = { chunkCount: previous.chunk_count, tokens: previous.tokens };
        this.chunksReused += previous.chunk_count;
      } else {
        const pieces: Chunk[] = await chunkText(page.text);
        pieces.forEach((c, seq) => chunks.push({ sourceId: id, seq, text: c.text, tokens: c.tokens }));
        counts = { chunkCount: pieces.length, tokens: pieces.reduce((sum, c) => sum + c.tokens, 0) };
      }
      pages.push({
        id,
        title: unchanged ? unchanged.title : (page.title ?? null),
        url: page.url,
        canonicalUrl: page.canonicalUrl,
        path: page.path,
        enabled: page.enabled,
        displayOrder: page.order,
        preview: unchanged ? unchanged.preview : previewOf(page.text),
        contentHash: hash,
        ...counts,
        etag: page.validators.etag ?? null,
        lastModified: page.validators.lastModified ?? null,
        fetchedAt: new Date(page.fetchedAt),
        links: JSON.stringify(page.links),
      });
    }
    const vectors = await this.embed(chunks.map((c) => c.text));
    const { counts, failures } = this.ctx.status();
    const now = this.ctx.now();
    await this.ctx.db.transaction(async (tx) => {
      // The fence first: a run that lost the job writes nothing.
      if (!(await crawlRepo.progress(tx, this.ctx.tenantId, this.ctx.crawlId, this.ctx.attempt, { counts, failures, chunksEmbedded: chunks.length, now }))) {
        throw new LeaseLostError(this.ctx.runnerJobId);
      }
      await snapshotRepo.insertPages(tx, { ...this.ctx, now }, pages);
      await snapshotRepo.insertChunks(tx, this.ctx.tenantId, this.ctx.embedder.model, chunks.map((c, i) => ({ ...c, vector: vectors[i] })));
      await snapshotRepo.copyChunks(tx, this.ctx.tenantId, copies);
    });
    this.pagesWritten += pages.length;
    this.chunksEmbedded += chunks.length;
  }

  /** Vectors of `texts`, in order, in calls of the embedder's batch size. */
  private async embed(texts: string[]): Promise<number[][]> {
    const { embedder, signal } = this.ctx;
    const vectors: number[][] = [];
    for (let start = 0; start < texts.length; start += embedder.batchSize) {
      vectors.push(...(await embedder.embed(texts.slice(start, start + embedder.batchSize), signal)));
    }
    return vectors;
  }
}
