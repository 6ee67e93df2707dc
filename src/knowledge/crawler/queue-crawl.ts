import type { Tx } from '../../db/driver.js';
import { newId } from '../../ids.js';
import { enqueue } from '../../jobs/queue.js';
import { crawlRepo } from './crawl-repo.js';
import { CRAWL_RUNNER_ATTEMPTS, TASK_CRAWL } from './job.js';
import { snapshotRepo } from './snapshot-repo.js';

export interface CrawlTarget {
  id: string;
  tenantId: string;
  rootUrl: string;
  crawlDepth: number;
  maxPages: number;
}

/**
 * Queues a crawl of the website inside the caller's transaction: a staging generation, the crawl job and
 * the runner job that runs it; the website shows `crawling`. Returns the crawl job's id.
 */
export async function queueCrawl(tx: Tx, website: CrawlTarget, now: Date): Promise<string> {
  const id = newId('crawl');
  const generationId = newId('wgen');
  await snapshotRepo.insertGeneration(tx, { id: generationId, tenantId: website.tenantId, websiteId: website.id, now });
  const runnerJobId = await enqueue(tx, now, {
    task: TASK_CRAWL,
    tenantId: website.tenantId,
    payload: { crawlJobId: id },
    dedupeKey: id,
    maxAttempts: CRAWL_RUNNER_ATTEMPTS,
  });
  await crawlRepo.insert(tx, {
    id,
    tenantId: website.tenantId,
    websiteId: website.id,
    generationId,
    runnerJobId: runnerJobId ?? null,
    url: website.rootUrl,
    crawlDepth: website.crawlDepth,
    maxPages: website.maxPages,
    now,
  });
  await snapshotRepo.setWebsiteStatus(tx, website.tenantId, website.id, 'crawling', now);
  return id;
}
