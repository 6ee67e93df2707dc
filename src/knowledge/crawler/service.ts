import type { Static } from 'typebox';
import type { Ctx } from '../../context.js';
import type { CrawlJobParams, CrawlListQuery, CreateWebsiteBody, StartCrawlBody } from './schema.js';
import type { Clock } from '../../clock.js';
import type { Db, Tx } from '../../db/driver.js';
import { conflict, invalid, notFound } from '../../errors.js';
import { newId } from '../../ids.js';
import { enqueue } from '../../jobs/queue.js';
import { createdByOf, requireProperty, resolveScope } from '../common.js';
import { sourceRepo } from '../repo.js';
import { websiteView } from '../views.js';
import { websiteRepo } from '../website-repo.js';
import { emitCrawlFailed } from './crawl-events.js';
import { crawlRepo } from './crawl-repo.js';
import { CRAWL_RUNNER_ATTEMPTS, TASK_CRAWL } from './job.js';
import { ruleProblem, type SelectionRule } from './selection.js';
import { snapshotRepo } from './snapshot-repo.js';
import { CrawlUrlError, checkCrawlUrl, normalizeRootUrl } from './url.js';
import { crawlJobView } from './view.js';

export type WebsiteInput = Static<typeof CreateWebsiteBody>;
export type StartCrawlInput = Static<typeof StartCrawlBody>;

const WEBSITE_FIELDS = ['rootUrl', 'title', 'crawlDepth', 'maxPages', 'scope', 'propertyId'] as const;

/** Managed websites and their crawl jobs. The crawl itself runs as a job (job.ts). */
export class CrawlService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly allowPrivateDestinations: boolean,
  ) {}

  private checkRoot(raw: string): URL {
    try {
      return checkCrawlUrl(raw.trim(), this.allowPrivateDestinations);
    } catch (error) {
      throw invalid('body.rootUrl', error instanceof CrawlUrlError ? error.message : 'must be a valid URL');
    }
  }

  private checkRules(rules: SelectionRule[] | undefined, root: URL): void {
    rules?.forEach((rule, i) => {
      const problem = ruleProblem(rule, root);
      if (problem) throw invalid(`body.selectionRules.${i}.key`, problem);
    });
  }

  /** Queues a crawl of the website (inside the caller's transaction): a staging generation, the crawl job and its runner job. */
  private async queueCrawl(tx: Tx, website: { id: string; tenantId: string; rootUrl: string; crawlDepth: number; maxPages: number }): Promise<string> {
    const now = this.clock.now();
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
    await crawlRepo.insert(tx, { id, tenantId: website.tenantId, websiteId: website.id, generationId, runnerJobId: runnerJobId ?? null, url: website.rootUrl, crawlDepth: website.crawlDepth, maxPages: website.maxPages, now });
    await snapshotRepo.setWebsiteStatus(tx, website.id, 'crawling', now);
    return id;
  }

  /**
   * Creates a managed website and queues its first crawl, in one transaction. A website with the same
   * normalised root URL and scope already exists → 409 with its websiteId (start a crawl of it instead).
   */
  async createWebsite(ctx: Ctx, input: WebsiteInput): Promise<{ websiteId: string; jobId: string }> {
    const { tenantId } = ctx;
    const actor = createdByOf(ctx.actor);
    const root = this.checkRoot(input.rootUrl);
    this.checkRules(input.selectionRules, root);
    const propertyId = resolveScope(input);
    const normalized = normalizeRootUrl(root);
    const websiteId = newId('web');
    const sourceId = newId('ks');
    const jobId = await this.db.transaction(async (tx) => {
      if (!(await crawlRepo.lockTenant(tx, tenantId))) throw notFound('tenant');
      if (propertyId) await requireProperty(tx, tenantId, propertyId);
      const existing = await crawlRepo.findWebsite(tx, tenantId, normalized, propertyId);
      if (existing) throw conflict('a website with this root URL and scope exists already; start a crawl of it with its websiteId', { websiteId: existing });
      await websiteRepo.insert(tx, {
        id: websiteId,
        sourceId,
        tenantId,
        title: input.title ?? root.hostname,
        rootUrl: root.href,
        normalizedRootUrl: normalized,
        crawlDepth: input.crawlDepth,
        maxPages: input.maxPages,
        propertyId,
        defaultEnabled: input.defaultEnabled,
        selectionRules: input.selectionRules?.map(({ kind, key, enabled }) => ({ kind, key, enabled })),
        createdBy: actor,
        now: this.clock.now(),
      });
      return this.queueCrawl(tx, { id: websiteId, tenantId, rootUrl: root.href, crawlDepth: input.crawlDepth, maxPages: input.maxPages });
    });
    return { websiteId, jobId };
  }

  /** The website as the inventory shows it, with its latest crawl job. */
  async websiteItem(tenantId: string, websiteId: string) {
    const website = await crawlRepo.website(this.db, websiteId);
    if (!website || website.tenant_id !== tenantId) throw notFound('website');
    const [row] = await websiteRepo.bySourceIds(this.db, tenantId, [website.source_id]);
    const source = await sourceRepo.get(this.db, tenantId, website.source_id);
    const pages = await websiteRepo.currentPages(this.db, [websiteId]);
    const [latest] = await crawlRepo.latestByWebsite(this.db, [websiteId]);
    return { ...websiteView(source!, row, pages), ...(latest ? { latestJob: crawlJobView(latest) } : {}) };
  }

  /** Admin: creates a website (201 with the website item; its first crawl is queued). */
  async createWebsiteItem(ctx: Ctx, input: WebsiteInput) {
    const { websiteId } = await this.createWebsite(ctx, input);
    return this.websiteItem(ctx.tenantId, websiteId);
  }

  /**
   * Starts a crawl: of an existing website (`websiteId`, optionally changing its selection rules first), or
   * of a new website (`rootUrl`, `crawlDepth`, `maxPages`, …). One queued or running crawl per website:
   * another start while one is active is 409 M2M_CONFLICT naming the active job.
   */
  async start(ctx: Ctx, input: StartCrawlInput) {
    const { tenantId } = ctx;
    if (input.websiteId === undefined) {
      for (const field of ['rootUrl', 'crawlDepth', 'maxPages'] as const) {
        if (input[field] === undefined) throw invalid(`body.${field}`, 'is required when websiteId is absent');
      }
      const { jobId } = await this.createWebsite(ctx, input as WebsiteInput);
      return this.job(tenantId, jobId);
    }
    for (const field of WEBSITE_FIELDS) {
      if (input[field] !== undefined) throw invalid(`body.${field}`, 'must be absent when websiteId is given (it belongs to the website)');
    }
    await this.reconcile(tenantId);
    const websiteId = input.websiteId;
    const jobId = await this.db.transaction(async (tx) => {
      const website = await crawlRepo.website(tx, websiteId, true);
      if (!website || website.tenant_id !== tenantId) throw notFound('website');
      const active = await crawlRepo.activeForWebsite(tx, websiteId);
      if (active) throw conflict('a crawl of this website is already queued or running', { jobId: active.id, websiteId });
      if (input.selectionRules !== undefined || input.defaultEnabled !== undefined) {
        this.checkRules(input.selectionRules, new URL(website.root_url));
        await crawlRepo.updateSelection(tx, websiteId, { defaultEnabled: input.defaultEnabled, selectionRules: input.selectionRules?.map(({ kind, key, enabled }) => ({ kind, key, enabled })) }, this.clock.now());
      }
      return this.queueCrawl(tx, { id: websiteId, tenantId, rootUrl: website.root_url, crawlDepth: website.crawl_depth, maxPages: website.max_pages });
    });
    return this.job(tenantId, jobId);
  }

  /** Crawls whose runner job ended without them (it gave up) are failed, and their websites marked failed. */
  private async reconcile(tenantId: string): Promise<void> {
    if (!(await crawlRepo.hasOrphans(this.db, tenantId))) return;
    const now = this.clock.now();
    await this.db.transaction(async (tx) => {
      for (const orphan of await crawlRepo.failOrphans(tx, tenantId, now)) {
        await snapshotRepo.discard(tx, orphan.generation_id, true);
        await snapshotRepo.setWebsiteStatus(tx, orphan.website_id, 'failed', now);
        await emitCrawlFailed(tx, now, orphan);
      }
    });
  }

  /** Recent crawl jobs, newest first: queued and running ones (active, the default) or all. */
  async listJobs({ tenantId }: Ctx, query: Static<typeof CrawlListQuery>) {
    await this.reconcile(tenantId);
    const rows = await crawlRepo.list(this.db, tenantId, { limit: query.limit ?? 20, activeOnly: (query.status ?? 'active') === 'active' });
    return { jobs: rows.map(crawlJobView) };
  }

  async getJob({ tenantId }: Ctx, { jobId }: Static<typeof CrawlJobParams>) {
    return this.job(tenantId, jobId);
  }

  private async job(tenantId: string, jobId: string) {
    await this.reconcile(tenantId);
    const row = await crawlRepo.get(this.db, tenantId, jobId);
    if (!row) throw notFound('crawl job');
    return { job: crawlJobView(row), failedPages: row.failed_pages, changedPages: row.changed_pages };
  }
}
