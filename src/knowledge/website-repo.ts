import type { Queryable } from '../db/driver.js';
import type { CreatedBy } from './repo.js';

export interface SelectionRule {
  kind: 'path' | 'page' | 'required';
  key: string;
  enabled: boolean;
}

export interface WebsiteRow {
  id: string;
  tenant_id: string;
  source_id: string;
  root_url: string;
  normalized_root_url: string;
  crawl_depth: number;
  max_pages: number;
  status: 'idle' | 'crawling' | 'failed';
  default_enabled: boolean;
  selection_rules: SelectionRule[];
  current_generation_id: string | null;
  last_crawled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface PageRow {
  id: string;
  website_id: string;
  url: string;
  canonical_url: string;
  path: string;
  enabled: boolean;
  chunk_count: number;
  tokens: number;
  display_order: number | null;
  updated_at: Date;
}

/**
 * Managed websites. A website is a row here plus its own row in knowledge_sources (kind 'website', which
 * carries title, url, scope, active and the inventory order); its pages are knowledge_sources rows of kind
 * 'website_page' tied to a crawl generation. The crawler writes these; the inventory reads them.
 */
export const websiteRepo = {
  async insert(
    db: Queryable,
    row: {
      id: string;
      sourceId: string;
      tenantId: string;
      title: string;
      rootUrl: string;
      normalizedRootUrl: string;
      crawlDepth: number;
      maxPages: number;
      propertyId: string | null;
      active?: boolean;
      defaultEnabled?: boolean;
      selectionRules?: SelectionRule[];
      createdBy: CreatedBy;
      now: Date;
    },
  ): Promise<void> {
    await db.query(
      `INSERT INTO knowledge_sources (id, tenant_id, kind, title, url, active, property_id, created_by, created_at, updated_at)
       VALUES ($1, $2, 'website', $3, $4, $5, $6, $7, $8, $8)`,
      [row.sourceId, row.tenantId, row.title, row.rootUrl, row.active ?? true, row.propertyId, JSON.stringify(row.createdBy), row.now],
    );
    await db.query(
      `INSERT INTO knowledge_websites (id, tenant_id, source_id, root_url, normalized_root_url, crawl_depth, max_pages, default_enabled,
         selection_rules, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
      [row.id, row.tenantId, row.sourceId, row.rootUrl, row.normalizedRootUrl, row.crawlDepth, row.maxPages, row.defaultEnabled ?? true,
        JSON.stringify(row.selectionRules ?? []), row.now],
    );
  },

  async insertGeneration(db: Queryable, row: { id: string; tenantId: string; websiteId: string; state: 'staging' | 'current'; now: Date }): Promise<void> {
    await db.query(
      `INSERT INTO knowledge_website_generations (id, tenant_id, website_id, state, created_at, completed_at)
       VALUES ($1, $2, $3, $4, $5, CASE WHEN $4 = 'current' THEN $5::timestamptz END)`,
      [row.id, row.tenantId, row.websiteId, row.state, row.now],
    );
    if (row.state === 'current') {
      await db.query('UPDATE knowledge_websites SET current_generation_id = $2, last_crawled_at = $3, updated_at = $3 WHERE id = $1 AND tenant_id = $4', [
        row.websiteId,
        row.id,
        row.now,
        row.tenantId,
      ]);
    }
  },

  async insertPage(
    db: Queryable,
    row: {
      id: string;
      tenantId: string;
      websiteId: string;
      generationId: string;
      title: string | null;
      url: string;
      canonicalUrl: string;
      path: string;
      enabled: boolean;
      displayOrder?: number;
      propertyId: string | null;
      createdBy: CreatedBy;
      now: Date;
    },
  ): Promise<void> {
    await db.query(
      `INSERT INTO knowledge_sources (id, tenant_id, kind, title, url, active, property_id, website_id, website_generation_id, canonical_url,
         path, enabled, display_order, ingest_status, created_by, created_at, updated_at)
       VALUES ($1, $2, 'website_page', $3, $4, true, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13, $13)`,
      [row.id, row.tenantId, row.title, row.url, row.propertyId, row.websiteId, row.generationId, row.canonicalUrl, row.path, row.enabled,
        row.displayOrder ?? null, JSON.stringify(row.createdBy), row.now],
    );
  },

  /** Websites whose inventory rows are `sourceIds`. */
  async bySourceIds(db: Queryable, tenantId: string, sourceIds: string[]): Promise<WebsiteRow[]> {
    if (sourceIds.length === 0) return [];
    return db.query<WebsiteRow>('SELECT * FROM knowledge_websites WHERE tenant_id = $1 AND source_id = ANY($2::text[])', [tenantId, sourceIds]);
  },

  /** Pages of the current generation of each website, in display order (at most 500 each: maxPages caps them). */
  async currentPages(db: Queryable, websiteIds: string[]): Promise<PageRow[]> {
    if (websiteIds.length === 0) return [];
    return db.query<PageRow>(
      `SELECT s.id, s.website_id, s.url, s.canonical_url, s.path, s.enabled, s.chunk_count, s.tokens, s.display_order, s.updated_at
       FROM knowledge_sources s JOIN knowledge_websites w ON w.id = s.website_id AND s.website_generation_id = w.current_generation_id
       WHERE s.kind = 'website_page' AND s.website_id = ANY($1::text[])
       ORDER BY s.website_id, s.display_order NULLS LAST, s.canonical_url, s.id`,
      [websiteIds],
    );
  },

  /** The website row's counters (enabled pages' chunks and tokens), after its pages' `enabled` changed. */
  async setTotals(db: Queryable, tenantId: string, sourceId: string, totals: { chunks: number; tokens: number }, now: Date): Promise<void> {
    await db.query('UPDATE knowledge_sources SET chunk_count = $3, tokens = $4, updated_at = $5 WHERE tenant_id = $1 AND id = $2', [
      tenantId, sourceId, totals.chunks, totals.tokens, now,
    ]);
  },

  async touch(db: Queryable, tenantId: string, websiteId: string, now: Date): Promise<void> {
    await db.query('UPDATE knowledge_websites SET updated_at = $3 WHERE tenant_id = $1 AND id = $2', [tenantId, websiteId, now]);
  },

  /** A page's generation state (for a page read as a knowledge source). */
  async generationState(db: Queryable, generationId: string): Promise<'staging' | 'current' | 'superseded' | undefined> {
    const rows = await db.query<{ state: 'staging' | 'current' | 'superseded' }>('SELECT state FROM knowledge_website_generations WHERE id = $1', [generationId]);
    return rows[0]?.state;
  },
};
