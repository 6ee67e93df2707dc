import type { Clock } from '../../clock.js';
import type { Db } from '../../db/driver.js';
import { enqueue } from '../../jobs/queue.js';
import type { JobRunner } from '../../jobs/runner.js';
import { crawlRepo } from './crawl-repo.js';
import { queueCrawl } from './queue-crawl.js';
import { nextCrawlAt } from './schedule.js';
import type { TaskName } from '../../jobs/tasks.js';

export const TASK_RECRAWL = 'knowledge.recrawl' satisfies TaskName;

/** Schedules the recrawl pass once across all workers (the dedupe key keeps it single). */
export async function scheduleRecrawls(db: Db, clock: Clock, runAt?: Date): Promise<void> {
  await db.transaction((tx) => enqueue(tx, clock.now(), { task: TASK_RECRAWL, dedupeKey: TASK_RECRAWL, runAt: runAt ?? clock.now(), maxAttempts: 5 }));
}

/**
 * Queues crawls of at most `limit` due websites (soonest first) in one transaction and returns their crawl
 * job ids. Websites are claimed with SKIP LOCKED and skipped while a crawl is queued or running, so two
 * workers never start the same recrawl. Each claimed website's next time moves one interval on at once; the
 * crawl's end sets it again (from its completion, or backed off after a failure).
 */
export async function startDueRecrawls(db: Db, now: Date, limit: number): Promise<string[]> {
  return db.transaction(async (tx) => {
    const jobIds: string[] = [];
    for (const website of await crawlRepo.claimDue(tx, now, limit)) {
      const hours = website.recrawl_interval_hours ?? 24;
      await crawlRepo.setSchedule(tx, website.tenant_id, website.id, { nextCrawlAt: nextCrawlAt(now, website.id, hours, website.failed_crawls) });
      const target = { id: website.id, tenantId: website.tenant_id, rootUrl: website.root_url, crawlDepth: website.crawl_depth, maxPages: website.max_pages };
      jobIds.push(await queueCrawl(tx, target, now));
    }
    return jobIds;
  });
}

/**
 * The recrawl pass, every `intervalMs` by one worker at a time: starts at most `batch` due crawls, so a
 * thousand websites due in the same hour start a batch a pass rather than all at once.
 */
export function registerRecrawls(runner: JobRunner, deps: { db: Db; intervalMs: number; batch: number }): void {
  const { db, intervalMs, batch } = deps;
  runner.register(TASK_RECRAWL, async (_job, ctx) => {
    const now = ctx.clock.now();
    const started = await startDueRecrawls(db, now, batch);
    await db.transaction(async (tx) => {
      await ctx.completeIn(tx);
      await enqueue(tx, now, { task: TASK_RECRAWL, dedupeKey: TASK_RECRAWL, runAt: new Date(now.getTime() + intervalMs), maxAttempts: 5 });
    });
    if (started.length > 0) ctx.log.info({ crawlJobIds: started }, 'scheduled recrawls started');
  });
}
