import type { Static } from 'typebox';
import type { Queryable } from '../../db/driver.js';
import type { ChangedPage, CrawlChanges } from './schema.js';

export type CrawlStatus = 'queued' | 'running' | 'completed' | 'failed';
export type CrawlPhase = 'queued' | 'crawling' | 'embedding' | 'finalizing';

export interface CrawlJobRow {
  id: string;
  tenant_id: string;
  website_id: string;
  /** The website's inventory row (joined). */
  source_id: string;
  generation_id: string;
  runner_job_id: number | null;
  status: CrawlStatus;
  phase: CrawlPhase;
  url: string;
  crawl_depth: number;
  max_pages: number;
  pages_discovered: number;
  pages_processed: number;
  pages_failed: number;
  chunks_embedded: number;
  chunks: number | null;
  snapshot_pages: number | null;
  failed_pages: Array<{ url: string; code: string; message: string }>;
  error_code: string | null;
  error_message: string | null;
  run_attempt: number;
  changes: Static<typeof CrawlChanges> | null;
  changed_pages: Array<Static<typeof ChangedPage>>;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  updated_at: Date;
}

/** What a crawl needs of its website: the crawl settings and, from its inventory row, scope and author. */
export interface CrawlWebsite {
  id: string;
  tenant_id: string;
  source_id: string;
  root_url: string;
  crawl_depth: number;
  max_pages: number;
  default_enabled: boolean;
  selection_rules: Array<{ kind: 'path' | 'page' | 'required'; key: string; enabled: boolean }>;
  current_generation_id: string | null;
  recrawl_interval_hours: number | null;
  failed_crawls: number;
  property_id: string | null;
  created_by: { id: string; displayName: string; email?: string } | null;
}

export interface CrawlCounts {
  pagesDiscovered: number;
  pagesProcessed: number;
  pagesFailed: number;
}

const select = `SELECT c.*, w.source_id FROM knowledge_crawl_jobs c JOIN knowledge_websites w ON w.id = c.website_id`;
const ACTIVE = `c.status IN ('queued', 'running')`;

/** Crawl jobs. Writes by a running crawl are fenced by its run_attempt: a run that was taken over writes nothing. */
export const crawlRepo = {
  async insert(
    db: Queryable,
    row: { id: string; tenantId: string; websiteId: string; generationId: string; runnerJobId: number | null; url: string; crawlDepth: number; maxPages: number; now: Date },
  ): Promise<void> {
    await db.query(
      `INSERT INTO knowledge_crawl_jobs (id, tenant_id, website_id, generation_id, runner_job_id, url, crawl_depth, max_pages, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
      [row.id, row.tenantId, row.websiteId, row.generationId, row.runnerJobId, row.url, row.crawlDepth, row.maxPages, row.now],
    );
  },

  async website(db: Queryable, websiteId: string, lock = false): Promise<CrawlWebsite | undefined> {
    const rows = await db.query<CrawlWebsite>(
      `SELECT w.id, w.tenant_id, w.source_id, w.root_url, w.crawl_depth, w.max_pages, w.default_enabled, w.selection_rules, w.current_generation_id,
         w.recrawl_interval_hours, w.failed_crawls, s.property_id, s.created_by
       FROM knowledge_websites w JOIN knowledge_sources s ON s.id = w.source_id WHERE w.id = $1${lock ? ' FOR UPDATE OF w' : ''}`,
      [websiteId],
    );
    return rows[0];
  },

  /** A website of the tenant with this normalised root URL and scope (websites are unique by both). */
  async findWebsite(db: Queryable, tenantId: string, normalizedRootUrl: string, propertyId: string | null): Promise<string | undefined> {
    const rows = await db.query<{ id: string }>(
      `SELECT w.id FROM knowledge_websites w JOIN knowledge_sources s ON s.id = w.source_id
       WHERE w.tenant_id = $1 AND w.normalized_root_url = $2 AND s.property_id IS NOT DISTINCT FROM $3::text`,
      [tenantId, normalizedRootUrl, propertyId],
    );
    return rows[0]?.id;
  },

  /** Serialises website creation per tenant (the duplicate check above, then the insert). */
  async lockTenant(db: Queryable, tenantId: string): Promise<boolean> {
    return (await db.query('SELECT id FROM tenants WHERE id = $1 FOR UPDATE', [tenantId])).length > 0;
  },

  async updateSelection(db: Queryable, tenantId: string, websiteId: string, change: { defaultEnabled?: boolean; selectionRules?: unknown[] }, now: Date): Promise<void> {
    await db.query(
      `UPDATE knowledge_websites SET default_enabled = coalesce($2, default_enabled), selection_rules = coalesce($3::jsonb, selection_rules), updated_at = $4
       WHERE id = $1 AND tenant_id = $5`,
      [websiteId, change.defaultEnabled ?? null, change.selectionRules ? JSON.stringify(change.selectionRules) : null, now, tenantId],
    );
  },

  /** The recrawl schedule: interval (undefined keeps it), next crawl time and failures in a row (undefined keeps it). */
  async setSchedule(
    db: Queryable,
    tenantId: string,
    websiteId: string,
    change: { intervalHours?: number | null; nextCrawlAt: Date | null; failedCrawls?: number },
  ): Promise<void> {
    await db.query(
      `UPDATE knowledge_websites SET recrawl_interval_hours = CASE WHEN $2 THEN $3::int ELSE recrawl_interval_hours END, next_crawl_at = $4,
         failed_crawls = coalesce($5, failed_crawls)
       WHERE id = $1 AND tenant_id = $6`,
      [websiteId, change.intervalHours !== undefined, change.intervalHours ?? null, change.nextCrawlAt, change.failedCrawls ?? null, tenantId],
    );
  },

  async lastCrawledAt(db: Queryable, websiteId: string): Promise<Date | null> {
    const rows = await db.query<{ last_crawled_at: Date | null }>('SELECT last_crawled_at FROM knowledge_websites WHERE id = $1', [websiteId]);
    return rows[0]?.last_crawled_at ?? null;
  },

  async schedule(db: Queryable, tenantId: string, websiteId: string): Promise<{ recrawl_interval_hours: number | null; next_crawl_at: Date | null } | undefined> {
    const rows = await db.query<{ recrawl_interval_hours: number | null; next_crawl_at: Date | null }>(
      'SELECT recrawl_interval_hours, next_crawl_at FROM knowledge_websites WHERE tenant_id = $1 AND id = $2',
      [tenantId, websiteId],
    );
    return rows[0];
  },

  async setTitle(db: Queryable, tenantId: string, sourceId: string, title: string, now: Date): Promise<void> {
    await db.query('UPDATE knowledge_sources SET title = $3, updated_at = $4 WHERE tenant_id = $1 AND id = $2', [tenantId, sourceId, title, now]);
  },

  /**
   * Websites of every tenant whose recrawl is due and that have no crawl queued or running, soonest first,
   * locked for the caller's transaction (SKIP LOCKED: two schedulers never take the same website).
   */
  async claimDue(db: Queryable, now: Date, limit: number): Promise<Array<CrawlWebsite & { next_crawl_at: Date }>> {
    return db.query<CrawlWebsite & { next_crawl_at: Date }>(
      `SELECT w.id, w.tenant_id, w.source_id, w.root_url, w.crawl_depth, w.max_pages, w.default_enabled, w.selection_rules, w.current_generation_id,
         w.recrawl_interval_hours, w.failed_crawls, w.next_crawl_at, NULL::text AS property_id, NULL::jsonb AS created_by
       FROM knowledge_websites w
       WHERE w.next_crawl_at <= $1 AND w.recrawl_interval_hours IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM knowledge_crawl_jobs c WHERE c.website_id = w.id AND ${ACTIVE})
       ORDER BY w.next_crawl_at, w.id LIMIT $2 FOR UPDATE OF w SKIP LOCKED`,
      [now, limit],
    );
  },

  async get(db: Queryable, tenantId: string, id: string): Promise<CrawlJobRow | undefined> {
    return (await db.query<CrawlJobRow>(`${select} WHERE c.tenant_id = $1 AND c.id = $2`, [tenantId, id]))[0];
  },

  async byId(db: Queryable, id: string): Promise<CrawlJobRow | undefined> {
    return (await db.query<CrawlJobRow>(`${select} WHERE c.id = $1`, [id]))[0];
  },

  /** Newest first; `activeOnly` keeps queued and running jobs. */
  async list(db: Queryable, tenantId: string, options: { limit: number; activeOnly: boolean }): Promise<CrawlJobRow[]> {
    return db.query<CrawlJobRow>(
      `${select} WHERE c.tenant_id = $1 ${options.activeOnly ? `AND ${ACTIVE}` : ''} ORDER BY c.created_at DESC, c.id DESC LIMIT $2`,
      [tenantId, options.limit],
    );
  },

  async activeForWebsite(db: Queryable, websiteId: string): Promise<CrawlJobRow | undefined> {
    return (await db.query<CrawlJobRow>(`${select} WHERE c.website_id = $1 AND ${ACTIVE}`, [websiteId]))[0];
  },

  /** The newest job of each website (for a website's latestJob). */
  async latestByWebsite(db: Queryable, websiteIds: string[]): Promise<CrawlJobRow[]> {
    if (websiteIds.length === 0) return [];
    return db.query<CrawlJobRow>(
      `SELECT DISTINCT ON (c.website_id) c.*, w.source_id FROM knowledge_crawl_jobs c JOIN knowledge_websites w ON w.id = c.website_id
       WHERE c.website_id = ANY($1::text[]) ORDER BY c.website_id, c.created_at DESC, c.id DESC`,
      [websiteIds],
    );
  },

  /** Whether failOrphans would fail anything (a read, so that reads of crawl jobs stay one statement). */
  async hasOrphans(db: Queryable, tenantId: string): Promise<boolean> {
    const rows = await db.query(
      `SELECT 1 FROM knowledge_crawl_jobs c WHERE c.tenant_id = $1 AND ${ACTIVE} AND NOT EXISTS (
         SELECT 1 FROM jobs j WHERE j.id = c.runner_job_id AND j.state IN ('queued', 'running')) LIMIT 1`,
      [tenantId],
    );
    return rows.length > 0;
  },

  /**
   * Fails the tenant's queued/running crawls whose runner job is gone or finished (it gave up, or was purged):
   * such a crawl will never run again, so it must not look alive. Returns the crawls' websites and staging generations.
   */
  async failOrphans(db: Queryable, tenantId: string, now: Date): Promise<Array<Pick<CrawlJobRow, 'id' | 'tenant_id' | 'website_id' | 'generation_id'>>> {
    return db.query<Pick<CrawlJobRow, 'id' | 'tenant_id' | 'website_id' | 'generation_id'>>(
      `UPDATE knowledge_crawl_jobs c SET status = 'failed', error_code = 'crawl_lost',
         error_message = 'the worker running this crawl gave up on it; start a new crawl', completed_at = $2, updated_at = $2
       WHERE c.tenant_id = $1 AND ${ACTIVE} AND NOT EXISTS (
         SELECT 1 FROM jobs j WHERE j.id = c.runner_job_id AND j.state IN ('queued', 'running'))
       RETURNING c.id, c.tenant_id, c.website_id, c.generation_id`,
      [tenantId, now],
    );
  },

  /** Starts (or restarts, after a crash) a run: counters reset, phase crawling. Undefined when the job is no longer active. */
  async begin(db: Queryable, tenantId: string, id: string, attempt: number, now: Date): Promise<CrawlJobRow | undefined> {
    const rows = await db.query<{ id: string }>(
      `UPDATE knowledge_crawl_jobs c SET status = 'running', phase = 'crawling', run_attempt = $2, started_at = $3, updated_at = $3,
         pages_discovered = 0, pages_processed = 0, pages_failed = 0, chunks_embedded = 0, failed_pages = '[]'::jsonb
       WHERE c.id = $1 AND c.tenant_id = $4 AND ${ACTIVE} RETURNING c.id`,
      [id, attempt, now, tenantId],
    );
    return rows.length > 0 ? crawlRepo.byId(db, id) : undefined;
  },

  /** Progress of the current run; false when this run no longer owns the job. */
  async progress(
    db: Queryable,
    tenantId: string,
    id: string,
    attempt: number,
    update: { phase?: CrawlPhase; counts?: CrawlCounts; chunksEmbedded?: number; failures?: CrawlJobRow['failed_pages']; now: Date },
  ): Promise<boolean> {
    const rows = await db.query(
      `UPDATE knowledge_crawl_jobs SET phase = coalesce($3, phase), pages_discovered = coalesce($4, pages_discovered),
         pages_processed = coalesce($5, pages_processed), pages_failed = coalesce($6, pages_failed),
         chunks_embedded = chunks_embedded + $7, failed_pages = coalesce($8::jsonb, failed_pages), updated_at = $9
       WHERE id = $1 AND tenant_id = $10 AND run_attempt = $2 AND status = 'running' RETURNING id`,
      [
        id, attempt, update.phase ?? null, update.counts?.pagesDiscovered ?? null, update.counts?.pagesProcessed ?? null,
        update.counts?.pagesFailed ?? null, update.chunksEmbedded ?? 0, update.failures ? JSON.stringify(update.failures) : null, update.now, tenantId,
      ],
    );
    return rows.length > 0;
  },

  async complete(
    db: Queryable,
    tenantId: string,
    id: string,
    attempt: number,
    result: { chunks: number; snapshotPages: number; changes: CrawlJobRow['changes']; changedPages: CrawlJobRow['changed_pages']; now: Date },
  ): Promise<boolean> {
    const rows = await db.query(
      `UPDATE knowledge_crawl_jobs SET status = 'completed', phase = 'finalizing', chunks = $3, snapshot_pages = $4, completed_at = $5, updated_at = $5,
         changes = $6::jsonb, changed_pages = $7::jsonb
       WHERE id = $1 AND tenant_id = $8 AND run_attempt = $2 AND status = 'running' RETURNING id`,
      [id, attempt, result.chunks, result.snapshotPages, result.now, JSON.stringify(result.changes), JSON.stringify(result.changedPages), tenantId],
    );
    return rows.length > 0;
  },

  /** Fails an active job (whatever run holds it). */
  async fail(db: Queryable, tenantId: string, id: string, error: { code: string; message: string; now: Date }): Promise<boolean> {
    const rows = await db.query(
      `UPDATE knowledge_crawl_jobs c SET status = 'failed', error_code = $2, error_message = $3, completed_at = $4, updated_at = $4
       WHERE c.id = $1 AND c.tenant_id = $5 AND ${ACTIVE} RETURNING c.id`,
      [id, error.code, error.message.slice(0, 1000), error.now, tenantId],
    );
    return rows.length > 0;
  },
};
