import type { Static } from 'typebox';
import type { Ctx } from '../../context.js';
import type { CrawlJobParams, CrawlListQuery, CreateWebsiteBody, StartCrawlBody, UpdateWebsiteBody, WebsiteParams } from './schema.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/driver.js';
import { conflict, invalid, notFound } from '../../errors.js';
import { newId } from '../../ids.js';
import { createdByOf, requireProperty, resolveScope } from '../common.js';
import { sourceRepo } from '../repo.js';
import { websiteView } from '../views.js';
import { websiteRepo } from '../website-repo.js';
import { iso } from '../../util/time.js';
import { crawlRepo } from './crawl-repo.js';
import { applySelection } from './enablement.js';
import { afterCrawlFailed } from './outcome.js';
import { queueCrawl } from './queue-crawl.js';
import { nextCrawlAt } from './schedule.js';
import { ruleProblem, type SelectionRule } from './selection.js';
import { CrawlUrlError, checkCrawlUrl, normalizeRootUrl } from './url.js';
import { crawlJobView } from './view.js';

export type WebsiteInput = Static<typeof CreateWebsiteBody>;
export type StartCrawlInput = Static<typeof StartCrawlBody>;
export type WebsiteUpdate = Static<typeof WebsiteParams> & Static<typeof UpdateWebsiteBody>;

const WEBSITE_FIELDS = ['rootUrl', 'title', 'crawlDepth', 'maxPages', 'scope', 'propertyId', 'recrawlIntervalHours'] as const;

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
      if (input.recrawlIntervalHours) {
        const hours = input.recrawlIntervalHours;
        await crawlRepo.setSchedule(tx, tenantId, websiteId, { intervalHours: hours, nextCrawlAt: nextCrawlAt(this.clock.now(), websiteId, hours) });
      }
      return queueCrawl(tx, { id: websiteId, tenantId, rootUrl: root.href, crawlDepth: input.crawlDepth, maxPages: input.maxPages }, this.clock.now());
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

  /**
   * PATCH /knowledge/websites/{websiteId}: title, recrawl interval, default and rules. Changed rules apply to
   * the current generation's pages at once (and to a crawl in progress when it finalizes); a new interval
   * counts from the last crawl. Returns the website item and its schedule.
   */
  async updateWebsite({ tenantId }: Ctx, { websiteId, ...input }: WebsiteUpdate) {
    await this.db.transaction(async (tx) => {
      const website = await crawlRepo.website(tx, websiteId, true);
      if (!website || website.tenant_id !== tenantId) throw notFound('website');
      const now = this.clock.now();
      if (input.title !== undefined) await crawlRepo.setTitle(tx, tenantId, website.source_id, input.title, now);
      if (input.selectionRules !== undefined || input.defaultEnabled !== undefined) {
        this.checkRules(input.selectionRules, new URL(website.root_url));
        const selectionRules = input.selectionRules?.map(({ kind, key, enabled }) => ({ kind, key, enabled }));
        await crawlRepo.updateSelection(tx, tenantId, websiteId, { defaultEnabled: input.defaultEnabled, selectionRules }, now);
        if (website.current_generation_id) {
          const updated = { ...website, default_enabled: input.defaultEnabled ?? website.default_enabled, selection_rules: selectionRules ?? website.selection_rules };
          const totals = await applySelection(tx, updated, website.current_generation_id, now);
          await websiteRepo.setTotals(tx, tenantId, website.source_id, { chunks: totals.enabledChunks, tokens: totals.enabledTokens }, now);
        }
      }
      if (input.recrawlIntervalHours !== undefined) {
        const hours = input.recrawlIntervalHours;
        const from = (await crawlRepo.lastCrawledAt(tx, websiteId)) ?? now;
        await crawlRepo.setSchedule(tx, tenantId, websiteId, { intervalHours: hours, nextCrawlAt: hours ? nextCrawlAt(from, websiteId, hours, website.failed_crawls) : null });
      }
      await websiteRepo.touch(tx, tenantId, websiteId, now);
    });
    return this.websiteEnvelope(tenantId, websiteId);
  }

  /** GET /knowledge/websites/{websiteId}: the website item with its recrawl schedule beside it, as the PATCH answers. */
  async getWebsite({ tenantId }: Ctx, { websiteId }: Static<typeof WebsiteParams>) {
    return this.websiteEnvelope(tenantId, websiteId);
  }

  private async websiteEnvelope(tenantId: string, websiteId: string) {
    const website = await this.websiteItem(tenantId, websiteId);
    const schedule = await crawlRepo.schedule(this.db, tenantId, websiteId);
    return {
      website,
      recrawlIntervalHours: schedule?.recrawl_interval_hours ?? null,
      nextCrawlAt: iso(schedule?.next_crawl_at ?? null),
    };
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
        await crawlRepo.updateSelection(tx, tenantId, websiteId, { defaultEnabled: input.defaultEnabled, selectionRules: input.selectionRules?.map(({ kind, key, enabled }) => ({ kind, key, enabled })) }, this.clock.now());
      }
      return queueCrawl(tx, { id: websiteId, tenantId, rootUrl: website.root_url, crawlDepth: website.crawl_depth, maxPages: website.max_pages }, this.clock.now());
    });
    return this.job(tenantId, jobId);
  }

  /** Crawls whose runner job ended without them (it gave up) are failed, and their websites marked failed. */
  private async reconcile(tenantId: string): Promise<void> {
    if (!(await crawlRepo.hasOrphans(this.db, tenantId))) return;
    const now = this.clock.now();
    await this.db.transaction(async (tx) => {
      for (const orphan of await crawlRepo.failOrphans(tx, tenantId, now)) await afterCrawlFailed(tx, now, orphan);
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
