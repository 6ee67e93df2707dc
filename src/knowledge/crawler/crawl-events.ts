import type { Static } from 'typebox';
import type { Tx } from '../../db/driver.js';
import { emit } from '../../webhooks/events.js';
import type { CrawlChanges } from './schema.js';

/** The crawl a finished-crawl event names. */
interface FinishedCrawl {
  id: string;
  tenant_id: string;
  website_id: string;
  generation_id: string;
}

/** knowledge.crawl.completed, in the transaction that completes the crawl (decisions 6.3). */
export async function emitCrawlCompleted(tx: Tx, now: Date, crawl: FinishedCrawl, changes: Static<typeof CrawlChanges>): Promise<void> {
  await emit(tx, now, crawl.tenant_id, 'knowledge.crawl.completed', {
    jobId: crawl.id,
    websiteId: crawl.website_id,
    websiteGenerationId: crawl.generation_id,
    status: 'completed',
    changes,
  });
}

/** knowledge.crawl.failed, in the transaction that fails the crawl. */
export async function emitCrawlFailed(tx: Tx, now: Date, crawl: FinishedCrawl): Promise<void> {
  await emit(tx, now, crawl.tenant_id, 'knowledge.crawl.failed', {
    jobId: crawl.id,
    websiteId: crawl.website_id,
    websiteGenerationId: crawl.generation_id,
    status: 'failed',
  });
}
