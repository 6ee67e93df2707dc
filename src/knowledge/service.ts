import type { Static } from 'typebox';
import { transactionOf, type Ctx } from '../context.js';
import type { CreateSourceBody, ItemsQuery as ItemsQuerySchema } from './schema.js';
import type { Clock } from '../clock.js';
import type { Db } from '../db/driver.js';
import { invalid } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { newId } from '../ids.js';
import { enqueue } from '../jobs/queue.js';
import type { BlobStore } from './blob-store.js';
import { previewOf } from './chunker.js';
import { TASK_INGEST, blobKey, containsPattern, createdByOf, decodeUpload, keysetPosition, requireProperty, resolveScope } from './common.js';
import { FetchFailure, checkFetchUrl } from './fetch.js';
import { sourceRepo, type InventoryFilter, type InventoryRow, type SourceKind } from './repo.js';
import { sourceView, websiteView } from './views.js';
import { websiteRepo, type PageRow } from './website-repo.js';
import { crawlRepo } from './crawler/crawl-repo.js';
import { crawlJobView } from './crawler/view.js';
import type { Embedder } from './crawler/embedder.js';
import type { SearchBody } from './search/schema.js';
import { LargeTenants } from './search/large-tenants.js';
import { searchKnowledge } from './search/search.js';

type CreateSourceInput = Static<typeof CreateSourceBody>;

type ItemsQuery = Static<typeof ItemsQuerySchema>;

const KINDS: Record<NonNullable<ItemsQuery['sourceType']>, SourceKind[]> = {
  text: ['text'],
  file: ['file', 'asset'],
  url: ['url'],
  website: ['website'],
};

/** Which of text / url / file a source type takes; the others must be absent. */
const CONTENT_FIELD = { text: 'text', url: 'url', file: 'file' } as const;

/** Knowledge sources and the inventory. Ingestion itself runs as a job (ingest.ts). */
export class KnowledgeService {
  private readonly largeTenants = new LargeTenants();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly cursors: Cursors,
    private readonly blobs: BlobStore,
    private readonly allowPrivateDestinations: boolean,
    /** Embeds questions for the search's vector side: the embedder the chunks were embedded with. */
    private readonly embedder: Embedder,
  ) {}

  /** POST /knowledge/search: the passages that answer a question, best first (decisions 7.5). */
  async search(ctx: Ctx, input: Static<typeof SearchBody>) {
    return searchKnowledge({ db: this.db, embedder: this.embedder, largeTenants: this.largeTenants }, ctx, input);
  }

  /** Creates a text, url or file source (inactive when `active` is false) and queues its ingestion in the same transaction. */
  async createSource(ctx: Ctx, input: CreateSourceInput) {
    const { tenantId } = ctx;
    const db = ctx.tx ?? this.db;
    const field = CONTENT_FIELD[input.sourceType];
    if (input[field] === undefined) throw invalid(`body.${field}`, `is required when sourceType is ${input.sourceType}`);
    for (const other of Object.values(CONTENT_FIELD)) {
      if (other !== field && input[other] !== undefined) throw invalid(`body.${other}`, `must be absent when sourceType is ${input.sourceType}`);
    }
    const propertyId = resolveScope(input);
    let url: string | undefined;
    if (input.url !== undefined) {
      try {
        url = checkFetchUrl(input.url.trim(), this.allowPrivateDestinations).toString();
      } catch (error) {
        throw invalid('body.url', error instanceof FetchFailure ? error.message : 'must be a valid URL');
      }
    }
    const bytes = input.file ? decodeUpload('body.file.contentBase64', input.file.contentBase64) : undefined;
    const id = newId('ks');
    const key = blobKey(tenantId, id);
    if (propertyId) await requireProperty(db, tenantId, propertyId);
    if (bytes) await this.blobs.put(key, bytes);
    try {
      await transactionOf(this.db, ctx, async (tx) => {
        const now = this.clock.now();
        if (propertyId) await requireProperty(tx, tenantId, propertyId);
        await sourceRepo.insert(tx, {
          id,
          tenantId,
          kind: input.sourceType,
          title: input.title,
          text: input.text ?? null,
          url: url ?? null,
          active: input.active ?? true,
          propertyId,
          preview: input.text !== undefined ? previewOf(input.text) : null,
          ingestStatus: 'pending',
          file: input.file && bytes ? { blobKey: key, filename: input.file.filename, contentType: input.file.contentType, size: bytes.length } : undefined,
          createdBy: createdByOf(ctx.actor),
          now,
        });
        await enqueue(tx, now, { task: TASK_INGEST, tenantId, payload: { sourceId: id }, dedupeKey: id, maxAttempts: 5 });
      });
    } catch (error) {
      // Nothing half-written: the bytes go when their row did not make it.
      if (bytes) await this.blobs.delete(key).catch(() => undefined);
      throw error;
    }
    return sourceView((await sourceRepo.get(db, tenantId, id))!);
  }

  /**
   * The inventory: sources, assets (as file sources) and one item per managed website, newest first.
   * The cursor is bound to the tenant and every filter; the keyset (createdAt, id) keeps pages stable
   * while items are added (new items sort before the cursor, so nothing repeats or is skipped).
   */
  async listItems({ tenantId }: Ctx, query: ItemsQuery) {
    const status = query.status ?? 'all';
    const propertyFilter = query.propertyFilter;
    if (propertyFilter !== undefined && propertyFilter !== 'global') await requireProperty(this.db, tenantId, propertyFilter);
    const binding = { tenantId, status, sourceType: query.sourceType ?? null, query: query.query ?? null, propertyFilter: propertyFilter ?? null };
    const after = query.cursor ? keysetPosition(this.cursors.decode<unknown>('knowledge-items', binding, query.cursor)) : undefined;
    const filter: InventoryFilter = {
      tenantId,
      kinds: query.sourceType ? KINDS[query.sourceType] : undefined,
      active: status === 'all' ? undefined : status === 'active',
      propertyId: propertyFilter === undefined ? undefined : propertyFilter === 'global' ? null : propertyFilter,
      pattern: query.query ? containsPattern(query.query) : undefined,
    };
    const limit = query.limit ?? 50;
    const rows = await sourceRepo.inventory(this.db, filter, { limit: limit + 1, after });
    const { page, next } = this.cursors.page('knowledge-items', binding, rows, limit, (last) => ({ at: last.created_key, id: last.id }));
    return { items: await this.items(tenantId, page), ...next };
  }

  private async items(tenantId: string, page: InventoryRow[]) {
    const websiteRows = page.filter((row) => row.kind === 'website');
    const websites = await websiteRepo.bySourceIds(this.db, tenantId, websiteRows.map((row) => row.id));
    const bySource = new Map(websites.map((w) => [w.source_id, w]));
    const pages = await websiteRepo.currentPages(this.db, websites.map((w) => w.id));
    const latestJobs = new Map((await crawlRepo.latestByWebsite(this.db, websites.map((w) => w.id))).map((job) => [job.website_id, job]));
    const pagesOf = new Map<string, PageRow[]>();
    for (const p of pages) {
      const list = pagesOf.get(p.website_id);
      if (list) list.push(p);
      else pagesOf.set(p.website_id, [p]);
    }
    const items = [];
    for (const row of page) {
      if (row.kind !== 'website') {
        items.push(sourceView(row));
        continue;
      }
      const website = bySource.get(row.id);
      if (!website) continue;
      const latest = latestJobs.get(website.id);
      items.push({ ...websiteView(row, website, pagesOf.get(website.id) ?? []), ...(latest ? { latestJob: crawlJobView(latest) } : {}) });
    }
    return items;
  }
}
