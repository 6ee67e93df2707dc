import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { Clock } from '../clock.js';
import type { Db, Queryable } from '../db/driver.js';
import { conflict, notFound } from '../errors.js';
import type { BlobStore } from './blob-store.js';
import { sourceRepo, type SourceRow } from './repo.js';
import type { PatchSourceBody, SourceParams } from './schema.js';
import { assetView, sourceView } from './views.js';
import { websiteRepo } from './website-repo.js';

type SourceInput = Static<typeof SourceParams>;

/**
 * Refuses a website's rows: the website's own row is the website (its title, scope and activity belong to
 * /knowledge/websites), and its pages follow its crawls and selection rules. Both name the website.
 */
async function refuseWebsiteRows(db: Queryable, row: SourceRow, pagesToo: boolean): Promise<void> {
  if (row.kind === 'website') {
    const [website] = await websiteRepo.bySourceIds(db, row.tenant_id, [row.id]);
    throw conflict('this source is a managed website; read and edit it with /knowledge/websites/{websiteId}', { reason: 'website_source', websiteId: website?.id });
  }
  if (pagesToo && row.kind === 'website_page') {
    throw conflict('this source is a page of a managed website; its crawls and selection rules decide it (PATCH /knowledge/websites/{websiteId})', {
      reason: 'website_page',
      websiteId: row.website_id,
    });
  }
}

/** One knowledge source by id: read it, rename it or switch it on and off, delete it (decisions 7.4). */
export class KnowledgeSourceService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly blobs: BlobStore,
  ) {}

  private async require(db: Queryable, tenantId: string, sourceId: string, lock = false): Promise<SourceRow> {
    const row = await sourceRepo.get(db, tenantId, sourceId, lock);
    if (!row) throw notFound('source');
    return row;
  }

  /** The source as the inventory lists it (a preview, not the full text); a website page with its generation. */
  private async item(db: Queryable, row: SourceRow) {
    const state = row.kind === 'website_page' && row.website_generation_id ? await websiteRepo.generationState(db, row.website_generation_id) : undefined;
    return sourceView({ ...row, text: null }, state);
  }

  /** GET /knowledge/sources/{sourceId}: `{asset}` for an asset, else `{source}`. */
  async get({ tenantId }: Ctx, { sourceId }: SourceInput) {
    const row = await this.require(this.db, tenantId, sourceId);
    await refuseWebsiteRows(this.db, row, false);
    return row.kind === 'asset' ? { asset: assetView(row) } : { source: await this.item(this.db, row) };
  }

  /**
   * PATCH /knowledge/sources/{sourceId}: title and active. Search reads `active` in its query, so a source
   * switched off leaves the answers with this commit; the inventory's activeTokens follow from the same column.
   */
  async update({ tenantId }: Ctx, { sourceId, ...patch }: SourceInput & Static<typeof PatchSourceBody>) {
    return this.db.transaction(async (tx) => {
      await refuseWebsiteRows(tx, await this.require(tx, tenantId, sourceId, true), true);
      await sourceRepo.patch(tx, tenantId, sourceId, patch, this.clock.now());
      return { source: await this.item(tx, await this.require(tx, tenantId, sourceId)) };
    });
  }

  /**
   * DELETE /knowledge/sources/{sourceId}: the row, its chunks and its folder membership in one transaction,
   * then its bytes. Bytes that fail to go are unreachable (every read of them goes through the row), so
   * the delete still succeeds rather than answering an error for a source that is gone.
   */
  async remove({ tenantId }: Ctx, { sourceId }: SourceInput): Promise<void> {
    const blobKey = await this.db.transaction(async (tx) => {
      const row = await this.require(tx, tenantId, sourceId, true);
      await refuseWebsiteRows(tx, row, true);
      await sourceRepo.delete(tx, tenantId, sourceId);
      return row.blob_key;
    });
    if (blobKey) await this.blobs.delete(blobKey).catch(() => undefined);
  }
}
