import { iso } from '../../util/time.js';
import type { CrawlJobRow } from './crawl-repo.js';

/** A crawl job as the spec's Knowledge crawl job. */
export function crawlJobView(row: CrawlJobRow) {
  return {
    jobId: row.id,
    status: row.status,
    progress: {
      phase: row.phase,
      pagesDiscovered: row.pages_discovered,
      pagesProcessed: row.pages_processed,
      chunksEmbedded: row.chunks_embedded,
    },
    chunks: row.chunks ?? undefined,
    url: row.url,
    crawlDepth: row.crawl_depth,
    maxPages: row.max_pages,
    sourceId: row.source_id,
    error: row.error_code ? { code: row.error_code, message: row.error_message ?? row.error_code } : undefined,
    websiteId: row.website_id,
    websiteGenerationId: row.generation_id,
    createdAt: iso(row.created_at)!,
    startedAt: iso(row.started_at),
    completedAt: iso(row.completed_at),
    updatedAt: iso(row.updated_at)!,
    snapshotPages: row.snapshot_pages ?? undefined,
    changes: row.changes ?? undefined,
  };
}

export type CrawlJobView = ReturnType<typeof crawlJobView>;
