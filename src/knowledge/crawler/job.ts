import type { WorkCounters } from '../../metrics/counters.js';
import type { Db } from '../../db/driver.js';
import { LeaseLostError, type ClaimedJob, type JobContext, type JobRunner } from '../../jobs/runner.js';
import { compareGenerations } from './changes.js';
import { emitCrawlCompleted } from './crawl-events.js';
import { crawlRepo, type CrawlJobRow, type CrawlWebsite } from './crawl-repo.js';
import { CrawlAbort, SiteCrawler, type CrawlerOptions, type PreviousPage } from './crawler.js';
import { EmbeddingError, type Embedder } from './embedder.js';
import { applySelection } from './enablement.js';
import { afterCrawlCompleted, afterCrawlFailed } from './outcome.js';
import { snapshotRepo, type ReusablePage } from './snapshot-repo.js';
import { pageKey } from './url.js';
import { SnapshotWriter } from './writer.js';
import type { TaskName } from '../../jobs/tasks.js';

export const TASK_CRAWL = 'knowledge.crawl' satisfies TaskName;
/** A crawl is run at most this many times (a worker crash or shutdown restarts it); then it fails with crawl_interrupted. */
export const CRAWL_MAX_RUNS = 3;
/** The runner's own limit stays above CRAWL_MAX_RUNS so the handler, not the runner, always decides the crawl's end. */
export const CRAWL_RUNNER_ATTEMPTS = CRAWL_MAX_RUNS + 5;
const PROGRESS_MS = 500;

export interface CrawlJobDeps {
  db: Db;
  embedder: Embedder;
  crawler: Omit<CrawlerOptions, 'signal'>;
  counters?: WorkCounters;
}

function describe(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ').slice(0, 500);
}

/** Ends a crawl as failed: its staging generation is discarded, the current one stays as it was. */
async function failCrawl(deps: CrawlJobDeps, ctx: JobContext, crawl: CrawlJobRow, code: string, message: string): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const now = ctx.clock.now();
    if (await crawlRepo.fail(tx, crawl.tenant_id, crawl.id, { code, message, now })) await afterCrawlFailed(tx, now, crawl);
    await ctx.completeIn(tx);
  });
  ctx.log.info({ crawlJobId: crawl.id, code, message }, 'crawl failed');
}

/**
 * The generation switch, in one transaction with the job's completion: pages' enabled flags from the
 * website's rules as they are now, staging → current, previous current → superseded, the website idle with
 * its counters, the crawl completed.
 */
async function finalize(deps: CrawlJobDeps, ctx: JobContext, crawl: CrawlJobRow, attempt: number, runnerJobId: number): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const now = ctx.clock.now();
    const website = await crawlRepo.website(tx, crawl.website_id, true);
    if (!website) throw new CrawlAbort('website_missing', 'the website no longer exists');
    const totals = await applySelection(tx, website, crawl.generation_id, now);
    const previous = website.current_generation_id ? await snapshotRepo.pages(tx, website.current_generation_id) : [];
    const { changes, changedPages } = compareGenerations(previous, totals.pages);
    const result = { chunks: totals.chunks, snapshotPages: totals.pages.length, changes, changedPages, now };
    if (!(await crawlRepo.complete(tx, crawl.tenant_id, crawl.id, attempt, result))) throw new LeaseLostError(runnerJobId);
    await snapshotRepo.promote(tx, website.tenant_id, website.id, crawl.generation_id, now);
    await snapshotRepo.finishWebsite(tx, website.tenant_id, { id: website.id, sourceId: website.source_id }, crawl.generation_id, { chunks: totals.enabledChunks, tokens: totals.enabledTokens }, now);
    await afterCrawlCompleted(tx, now, website);
    await emitCrawlCompleted(tx, now, crawl, changes);
    await ctx.completeIn(tx);
  });
}

/**
 * Pages a recrawl may reuse unread, by the page key they were stored at: those whose chunks it can reuse and
 * whose followed links were kept (pages stored before links were kept have none), with a validator to ask
 * conditionally or a fetch time to compare with the sitemap's <lastmod>.
 */
function previousPages(reusable: readonly ReusablePage[]): Map<string, PreviousPage> {
  const out = new Map<string, PreviousPage>();
  for (const page of reusable) {
    if (!page.followed_links || (!page.http_etag && !page.http_last_modified && !page.http_fetched_at)) continue;
    out.set(pageKey(new URL(page.url)), {
      id: page.id,
      canonicalKey: page.canonical_url,
      links: page.followed_links,
      etag: page.http_etag ?? undefined,
      lastModified: page.http_last_modified ?? undefined,
      fetchedAt: page.http_fetched_at?.getTime(),
    });
  }
  return out;
}

async function crawlOnce(deps: CrawlJobDeps, job: ClaimedJob, ctx: JobContext, crawl: CrawlJobRow, website: CrawlWebsite): Promise<void> {
  const { db } = deps;
  const attempt = job.attempts;
  const reusable = website.current_generation_id ? await snapshotRepo.reusable(db, website.current_generation_id, deps.embedder.model) : [];
  const crawler = new SiteCrawler(
    {
      root: new URL(website.root_url),
      crawlDepth: website.crawl_depth,
      maxPages: website.max_pages,
      rules: website.selection_rules,
      defaultEnabled: website.default_enabled,
      previous: previousPages(reusable),
    },
    { ...deps.crawler, signal: ctx.signal },
  );
  const status = () => ({ counts: { ...crawler.counters }, failures: crawler.failures });
  const writer = new SnapshotWriter(
    {
      db,
      crawlId: crawl.id,
      runnerJobId: job.id,
      attempt,
      tenantId: website.tenant_id,
      websiteId: website.id,
      generationId: crawl.generation_id,
      propertyId: website.property_id,
      createdBy: website.created_by,
      now: () => ctx.clock.now(),
      embedder: deps.embedder,
      signal: ctx.signal,
      status,
    },
    reusable,
  );
  // Failed pages do not reach the writer: counters also go out on a timer while pages are being fetched.
  let ticking = false;
  const ticker = setInterval(() => {
    if (ticking) return;
    ticking = true;
    void crawlRepo
      .progress(db, crawl.tenant_id, crawl.id, attempt, { ...status(), now: ctx.clock.now() })
      .catch((error: unknown) => ctx.log.warn({ err: error }, 'could not record crawl progress'))
      .finally(() => (ticking = false));
  }, PROGRESS_MS);
  try {
    await crawler.run((page) => writer.add(page));
  } finally {
    clearInterval(ticker);
  }
  // Every page is fetched: what is left is embedding and writing the last pages.
  await crawlRepo.progress(db, crawl.tenant_id, crawl.id, attempt, { phase: 'embedding', ...status(), now: ctx.clock.now() });
  await writer.flush();
  deps.counters?.crawlPages('processed', crawler.counters.pagesProcessed);
  deps.counters?.crawlPages('failed', crawler.counters.pagesFailed);
  if (writer.pagesWritten === 0) {
    const first = crawler.failures[0];
    throw new CrawlAbort('no_pages', first ? `no page could be stored; ${first.url}: ${first.code} (${first.message})` : 'no page could be stored: nothing on the site was reachable and allowed');
  }
  await crawlRepo.progress(db, crawl.tenant_id, crawl.id, attempt, { phase: 'finalizing', now: ctx.clock.now() });
  await finalize(deps, ctx, crawl, attempt, job.id);
  ctx.log.info({ crawlJobId: crawl.id, pages: writer.pagesWritten, embedded: writer.chunksEmbedded, reused: writer.chunksReused, failed: crawler.counters.pagesFailed }, 'crawl completed');
}

/**
 * knowledge.crawl: one crawl job from start to finish. A run that finds the job already running (its
 * worker died and the lease expired, or the node shut down) restarts it: the staging generation is
 * emptied and the crawl begins again. After CRAWL_MAX_RUNS runs it fails with crawl_interrupted; it never
 * stays running. Failures of the site (robots.txt unavailable, nothing storable) and of the embeddings
 * endpoint fail the crawl at once; unexpected errors are retried by the runner up to the same limit.
 */
async function runCrawl(deps: CrawlJobDeps, job: ClaimedJob<typeof TASK_CRAWL>, ctx: JobContext): Promise<void> {
  const crawl = await crawlRepo.byId(deps.db, job.payload.crawlJobId);
  if (!crawl || (crawl.status !== 'queued' && crawl.status !== 'running')) return;
  if (job.attempts > CRAWL_MAX_RUNS) {
    await failCrawl(deps, ctx, crawl, 'crawl_interrupted', `the crawl was interrupted ${job.attempts - 1} times (worker crash, shutdown or error) and was given up`);
    return;
  }
  const website = await crawlRepo.website(deps.db, crawl.website_id);
  if (!website) return failCrawl(deps, ctx, crawl, 'website_missing', 'the website no longer exists');
  await snapshotRepo.discard(deps.db, crawl.tenant_id, crawl.generation_id, false);
  const running = await crawlRepo.begin(deps.db, crawl.tenant_id, crawl.id, job.attempts, ctx.clock.now());
  if (!running) return;
  try {
    await crawlOnce(deps, job, ctx, running, website);
  } catch (error) {
    if (ctx.signal.aborted || error instanceof LeaseLostError) throw error;
    if (error instanceof CrawlAbort) return failCrawl(deps, ctx, running, error.code, error.message);
    if (error instanceof EmbeddingError) return failCrawl(deps, ctx, running, 'embedding_failed', error.message);
    if (job.attempts < CRAWL_MAX_RUNS) throw error;
    ctx.log.error({ err: error, crawlJobId: crawl.id }, 'crawl failed unexpectedly');
    return failCrawl(deps, ctx, running, 'internal_error', `the crawl failed unexpectedly: ${describe(error)}`);
  }
}

export function registerCrawlJobs(runner: JobRunner, deps: CrawlJobDeps): void {
  runner.register(TASK_CRAWL, (job, ctx) => runCrawl(deps, job, ctx));
}
