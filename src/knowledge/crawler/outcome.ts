import type { Tx } from '../../db/driver.js';
import { emitCrawlFailed } from './crawl-events.js';
import { crawlRepo } from './crawl-repo.js';
import { nextCrawlAt } from './schedule.js';
import { snapshotRepo } from './snapshot-repo.js';

/** The crawl a finished-crawl step names. */
interface EndedCrawl {
  id: string;
  tenant_id: string;
  website_id: string;
  generation_id: string;
}

/**
 * What follows a crawl that was just failed, in the same transaction: its staging generation is discarded
 * (the current one stays), the website is `failed`, a website on a recrawl schedule backs off (its interval
 * doubles with each failure in a row), and knowledge.crawl.failed is emitted.
 */
export async function afterCrawlFailed(tx: Tx, now: Date, crawl: EndedCrawl): Promise<void> {
  await snapshotRepo.discard(tx, crawl.tenant_id, crawl.generation_id, true);
  await snapshotRepo.setWebsiteStatus(tx, crawl.tenant_id, crawl.website_id, 'failed', now);
  const website = await crawlRepo.website(tx, crawl.website_id, true);
  if (website) {
    const failures = website.failed_crawls + 1;
    const hours = website.recrawl_interval_hours;
    await crawlRepo.setSchedule(tx, website.tenant_id, website.id, { failedCrawls: failures, nextCrawlAt: hours ? nextCrawlAt(now, website.id, hours, failures) : null });
  }
  await emitCrawlFailed(tx, now, crawl);
}

/** After a completed crawl: the failure count resets and the next recrawl is one interval away. */
export async function afterCrawlCompleted(tx: Tx, now: Date, website: { id: string; tenant_id: string; recrawl_interval_hours: number | null }): Promise<void> {
  const hours = website.recrawl_interval_hours;
  await crawlRepo.setSchedule(tx, website.tenant_id, website.id, { failedCrawls: 0, nextCrawlAt: hours ? nextCrawlAt(now, website.id, hours) : null });
}
