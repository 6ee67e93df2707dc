import type { Queryable } from '../../db/driver.js';
import type { CreatedBy } from '../repo.js';
import type { PageRow } from '../website-repo.js';

export interface NewPage {
  id: string;
  title: string | null;
  url: string;
  canonicalUrl: string;
  path: string;
  enabled: boolean;
  displayOrder: number;
  preview: string | null;
  contentHash: string;
  chunkCount: number;
  tokens: number;
  etag: string | null;
  lastModified: string | null;
  /** When the site last confirmed the page's content. */
  fetchedAt: Date;
  /** JSON array of the followed links' URLs. */
  links: string;
}

export type SnapshotPage = Pick<PageRow, 'id' | 'url' | 'canonical_url' | 'path' | 'enabled' | 'chunk_count' | 'tokens'> & { content_hash: string | null };

/** A page of the current generation whose chunks a new crawl may copy: by equal text, or unread after a 304. */
export interface ReusablePage {
  id: string;
  url: string;
  canonical_url: string;
  title: string | null;
  preview: string | null;
  content_hash: string;
  chunk_count: number;
  tokens: number;
  http_etag: string | null;
  http_last_modified: string | null;
  http_fetched_at: Date | null;
  followed_links: string[] | null;
}

/**
 * A vector as a PostgreSQL array literal of `real`s; a value that is not a finite `real` is stored as 0. Nine
 * significant digits of the value rounded to single precision read back as exactly that `real`: the literal is a
 * third shorter than the double's own digits, and stores the same numbers.
 */
function vectorLiteral(vector: readonly number[]): string {
  return `{${vector.map((x) => (Number.isFinite(Math.fround(x)) && x !== 0 ? Math.fround(x).toPrecision(9) : '0')).join(',')}}`;
}

/**
 * A website's crawl snapshots: the pages (knowledge_sources rows of kind website_page) and chunks of a
 * generation, and the generation switch. Batched: a crawl writes its pages a few dozen at a time.
 */
export const snapshotRepo = {
  async insertGeneration(db: Queryable, row: { id: string; tenantId: string; websiteId: string; now: Date }): Promise<void> {
    await db.query(
      `INSERT INTO knowledge_website_generations (id, tenant_id, website_id, state, created_at) VALUES ($1, $2, $3, 'staging', $4)`,
      [row.id, row.tenantId, row.websiteId, row.now],
    );
  },

  /** Empties a staging generation (its pages, and their chunks by cascade); with `drop`, removes it too. */
  async discard(db: Queryable, tenantId: string, generationId: string, drop: boolean): Promise<void> {
    await db.query(`DELETE FROM knowledge_sources WHERE kind = 'website_page' AND website_generation_id = $1 AND tenant_id = $2`, [generationId, tenantId]);
    if (drop) await db.query(`DELETE FROM knowledge_website_generations WHERE id = $1 AND tenant_id = $2 AND state = 'staging'`, [generationId, tenantId]);
  },

  /** Pages of a generation whose chunks all carry vectors of `model`: a page with the same text can copy them. */
  async reusable(db: Queryable, generationId: string, model: string): Promise<ReusablePage[]> {
    return db.query<ReusablePage>(
      `SELECT s.id, s.url, s.canonical_url, s.title, s.preview, s.content_hash, s.chunk_count, s.tokens, s.http_etag, s.http_last_modified, s.http_fetched_at, s.followed_links
       FROM knowledge_sources s
       WHERE s.website_generation_id = $1 AND s.kind = 'website_page' AND s.content_hash IS NOT NULL AND s.ingest_status = 'ready'
         AND NOT EXISTS (SELECT 1 FROM knowledge_chunks c WHERE c.source_id = s.id AND (c.embedding IS NULL OR c.embedding_model IS DISTINCT FROM $2))`,
      [generationId, model],
    );
  },

  async insertPages(
    db: Queryable,
    ctx: { tenantId: string; websiteId: string; generationId: string; propertyId: string | null; createdBy: CreatedBy | null; now: Date },
    pages: NewPage[],
  ): Promise<void> {
    if (pages.length === 0) return;
    const col = <K extends keyof NewPage>(key: K) => pages.map((p) => p[key]);
    await db.query(
      `INSERT INTO knowledge_sources (id, tenant_id, kind, title, url, active, property_id, website_id, website_generation_id, canonical_url, path,
         enabled, display_order, preview, content_hash, chunk_count, tokens, http_etag, http_last_modified, http_fetched_at, followed_links, ingest_status,
         ingested_at, created_by, created_at, updated_at)
       SELECT p.id, $1, 'website_page', p.title, p.url, true, $2, $3, $4, p.canonical_url, p.path, p.enabled, p.display_order, p.preview,
         p.content_hash, p.chunk_count, p.tokens, p.etag, p.last_modified, p.fetched_at, p.links::jsonb, 'ready', $5, $6, $5, $5
       FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::boolean[], $13::int[], $14::text[], $15::text[], $16::int[], $17::int[],
         $18::text[], $19::text[], $20::timestamptz[], $21::text[])
         AS p (id, title, url, canonical_url, path, enabled, display_order, preview, content_hash, chunk_count, tokens, etag, last_modified, fetched_at, links)`,
      [
        ctx.tenantId, ctx.propertyId, ctx.websiteId, ctx.generationId, ctx.now, ctx.createdBy ? JSON.stringify(ctx.createdBy) : null,
        col('id'), col('title'), col('url'), col('canonicalUrl'), col('path'), col('enabled'), col('displayOrder'), col('preview'),
        col('contentHash'), col('chunkCount'), col('tokens'), col('etag'), col('lastModified'), col('fetchedAt'), col('links'),
      ],
    );
  },

  /** New chunks with their vectors (of `model`), in the order of `chunks`. */
  async insertChunks(db: Queryable, tenantId: string, model: string, chunks: Array<{ sourceId: string; seq: number; text: string; tokens: number; vector: number[] }>): Promise<void> {
    if (chunks.length === 0) return;
    // Vectors travel as array literals ("{0.1,-0.2}"): unnest cannot split a 2-D array into rows of 1-D arrays.
    await db.query(
      `INSERT INTO knowledge_chunks (source_id, seq, tenant_id, text, tokens, embedding, embedding_model)
       SELECT c.source_id, c.seq, $1, c.text, c.tokens, c.vector::real[], $6
       FROM unnest($2::text[], $3::int[], $4::text[], $5::int[], $7::text[]) AS c (source_id, seq, text, tokens, vector)`,
      [tenantId, chunks.map((c) => c.sourceId), chunks.map((c) => c.seq), chunks.map((c) => c.text), chunks.map((c) => c.tokens), model, chunks.map((c) => vectorLiteral(c.vector))],
    );
  },

  /** Copies chunks with their vectors from an unchanged page of the previous snapshot. */
  async copyChunks(db: Queryable, tenantId: string, pairs: Array<{ to: string; from: string }>): Promise<void> {
    if (pairs.length === 0) return;
    await db.query(
      `INSERT INTO knowledge_chunks (source_id, seq, tenant_id, text, tokens, embedding, embedding_model)
       SELECT p.to_id, c.seq, c.tenant_id, c.text, c.tokens, c.embedding, c.embedding_model
       FROM unnest($1::text[], $2::text[]) AS p (to_id, from_id) JOIN knowledge_chunks c ON c.source_id = p.from_id AND c.tenant_id = $3`,
      [pairs.map((p) => p.to), pairs.map((p) => p.from), tenantId],
    );
  },

  async pages(db: Queryable, generationId: string): Promise<SnapshotPage[]> {
    return db.query<SnapshotPage>(
      `SELECT id, url, canonical_url, path, enabled, chunk_count, tokens, content_hash FROM knowledge_sources
       WHERE website_generation_id = $1 AND kind = 'website_page' ORDER BY display_order`,
      [generationId],
    );
  },

  async setEnabled(db: Queryable, tenantId: string, ids: string[], enabled: boolean, now: Date): Promise<void> {
    if (ids.length === 0) return;
    await db.query('UPDATE knowledge_sources SET enabled = $2, updated_at = $3 WHERE id = ANY($1::text[]) AND tenant_id = $4', [ids, enabled, now, tenantId]);
  },

  /**
   * The generation switch: the current generation becomes superseded and `generationId` current, the website
   * points at it, and pages of generations superseded before (older than the one just replaced) are deleted.
   */
  async promote(db: Queryable, tenantId: string, websiteId: string, generationId: string, now: Date): Promise<string | undefined> {
    const previous = await db.query<{ id: string }>(
      `UPDATE knowledge_website_generations SET state = 'superseded' WHERE website_id = $1 AND tenant_id = $2 AND state = 'current' RETURNING id`,
      [websiteId, tenantId],
    );
    await db.query(`UPDATE knowledge_website_generations SET state = 'current', completed_at = $2 WHERE id = $1 AND tenant_id = $3`, [generationId, now, tenantId]);
    const kept = previous[0]?.id ?? null;
    await db.query(
      `DELETE FROM knowledge_sources WHERE kind = 'website_page' AND website_id = $1 AND tenant_id = $3 AND website_generation_id IN (
         SELECT id FROM knowledge_website_generations WHERE website_id = $1 AND state = 'superseded' AND id IS DISTINCT FROM $2)`,
      [websiteId, kept, tenantId],
    );
    return kept ?? undefined;
  },

  /** After a successful crawl: current generation, idle, and the website row's counters (enabled pages only). */
  async finishWebsite(
    db: Queryable,
    tenantId: string,
    website: { id: string; sourceId: string },
    generationId: string,
    totals: { chunks: number; tokens: number },
    now: Date,
  ): Promise<void> {
    await db.query(
      `UPDATE knowledge_websites SET current_generation_id = $2, status = 'idle', last_crawled_at = $3, updated_at = $3 WHERE id = $1 AND tenant_id = $4`,
      [website.id, generationId, now, tenantId],
    );
    await db.query(
      `UPDATE knowledge_sources SET chunk_count = $2, tokens = $3, ingest_status = 'ready', ingested_at = $4, updated_at = $4 WHERE id = $1 AND tenant_id = $5`,
      [website.sourceId, totals.chunks, totals.tokens, now, tenantId],
    );
  },

  async setWebsiteStatus(db: Queryable, tenantId: string, websiteId: string, status: 'idle' | 'crawling' | 'failed', now: Date): Promise<void> {
    await db.query('UPDATE knowledge_websites SET status = $2, updated_at = $3 WHERE id = $1 AND tenant_id = $4', [websiteId, status, now, tenantId]);
  },
};
