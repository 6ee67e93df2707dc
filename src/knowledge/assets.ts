import type { Static } from 'typebox';
import { transactionOf, type Ctx } from '../context.js';
import type { CreateAssetBody, CreateFolderBody, FolderListQuery, FolderParams, MoveAssetBody, PatchFolderBody, SourceParams } from './schema.js';
import { timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db, Queryable } from '../db/driver.js';
import { conflict, invalid, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { enqueue } from '../jobs/queue.js';
import type { Cursors } from '../platform/cursor.js';
import { hmacBase64url } from '../secrets.js';
import { mediaTypeOf } from './assess.js';
import type { BlobStore } from './blob-store.js';
import { TASK_VALIDATE_ASSET, blobKey, createdByOf, decodeUpload, keysetPosition, requireProperty } from './common.js';
import { folderRepo, type FolderRow } from './folder-repo.js';
import { sourceRepo, type SourceRow } from './repo.js';
import { assetView, folderView } from './views.js';

type CreateAssetInput = Static<typeof CreateAssetBody>;

/** Assets, asset folders and their public share links. */
export class AssetService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly blobs: BlobStore,
    private readonly signingKey: Buffer,
    private readonly cursors: Cursors,
  ) {}

  private signature(folderId: string, version: number): string {
    return hmacBase64url(this.signingKey, `share-folder:${folderId}:${version}`).slice(0, 32);
  }

  private query(folder: { id: string; share_token_version: number }): string {
    return `v=${folder.share_token_version}&sig=${this.signature(folder.id, folder.share_token_version)}`;
  }

  /** The signed public link of an active folder (relative to the server root); none while inactive. */
  sharePath(folder: FolderRow): string | undefined {
    return folder.active ? `/share/folders/${encodeURIComponent(folder.id)}?${this.query(folder)}` : undefined;
  }

  private async folderView(db: Queryable, folder: FolderRow) {
    const members = await sourceRepo.folderMembers(db, [folder.id]);
    return folderView(folder, members.map((m) => m.id), this.sharePath(folder));
  }

  /** Stores the bytes, then records the asset (pending) and queues its validation in one transaction. */
  async createAsset(ctx: Ctx, input: CreateAssetInput) {
    const { tenantId } = ctx;
    const actor = createdByOf(ctx.actor);
    const bytes = decodeUpload('body.contentBase64', input.contentBase64);
    const id = newId('ks');
    const key = blobKey(tenantId, id);
    await this.blobs.put(key, bytes);
    try {
      // The answer is the row as this transaction wrote it: once committed, a worker may validate it at once.
      const created = await this.db.transaction(async (tx) => {
        const now = this.clock.now();
        let propertyId = input.propertyId ?? null;
        if (input.folderId !== undefined) {
          const folder = await this.requireFolder(tx, tenantId, input.folderId, true);
          if (!folder.active) throw conflict('the folder is inactive; activate it before adding assets', { folderId: folder.id });
          if (input.propertyId !== undefined && input.propertyId !== folder.property_id) {
            throw invalid('body.propertyId', "must be omitted or equal the folder's propertyId: an asset takes its folder's scope");
          }
          propertyId = folder.property_id;
        } else if (propertyId) await requireProperty(tx, tenantId, propertyId);
        await sourceRepo.insert(tx, {
          id,
          tenantId,
          kind: 'asset',
          title: input.title,
          active: true,
          propertyId,
          ingestStatus: 'ready',
          file: { blobKey: key, filename: input.filename, contentType: input.contentType, size: bytes.length },
          asset: { description: input.description || null, mediaType: mediaTypeOf(input.contentType), folderId: input.folderId ?? null },
          createdBy: actor,
          now,
        });
        await enqueue(tx, now, { task: TASK_VALIDATE_ASSET, tenantId, payload: { sourceId: id }, dedupeKey: id, maxAttempts: 5 });
        return sourceRepo.get(tx, tenantId, id);
      });
      if (!created) throw new Error('the asset just written was not found');
      return assetView(created);
    } catch (error) {
      await this.blobs.delete(key).catch(() => undefined);
      throw error;
    }
  }

  private async requireFolder(db: Queryable, tenantId: string, folderId: string, lock = false): Promise<FolderRow> {
    const folder = await folderRepo.get(db, tenantId, folderId, lock);
    if (!folder) throw notFound('asset folder');
    return folder;
  }

  /** GET /knowledge/asset-folders: newest first by (createdAt, folderId), the cursor bound to the tenant. */
  async listFolders({ tenantId }: Ctx, query: Static<typeof FolderListQuery>) {
    const binding = { tenantId };
    const after = query.cursor ? keysetPosition(this.cursors.decode<unknown>('asset-folders', binding, query.cursor)) : undefined;
    const limit = query.limit ?? 50;
    const rows = await folderRepo.list(this.db, tenantId, { limit: limit + 1, after });
    const { page, next } = this.cursors.page('asset-folders', binding, rows, limit, (last) => ({ at: last.created_key, id: last.id }));
    const members = await sourceRepo.folderMembers(this.db, page.map((f) => f.id));
    const orderOf = new Map<string, string[]>();
    for (const m of members) {
      const order = orderOf.get(m.folder_id);
      if (order) order.push(m.id);
      else orderOf.set(m.folder_id, [m.id]);
    }
    return { folders: page.map((f) => folderView(f, orderOf.get(f.id) ?? [], this.sharePath(f))), ...next };
  }

  /** GET /knowledge/asset-folders/{folderId}: the folder as its creation answered it. */
  async getFolder({ tenantId }: Ctx, { folderId }: Static<typeof FolderParams>) {
    return { folder: await this.folderView(this.db, await this.requireFolder(this.db, tenantId, folderId)) };
  }

  async createFolder(ctx: Ctx, input: Static<typeof CreateFolderBody>) {
    const { tenantId } = ctx;
    const id = newId('fld');
    return transactionOf(this.db, ctx, async (tx) => {
      if (input.propertyId) await requireProperty(tx, tenantId, input.propertyId);
      await folderRepo.insert(tx, { id, tenantId, title: input.title, description: input.description || null, propertyId: input.propertyId ?? null, now: this.clock.now() });
      return this.folderView(tx, (await folderRepo.get(tx, tenantId, id))!);
    });
  }

  /**
   * Only supplied fields change. An empty description clears it; propertyId null makes the folder global;
   * a scope change is applied to every asset in the folder; active false revokes every share link
   * (the token version goes up, so links signed with the old one stop working for good).
   */
  async updateFolder({ tenantId }: Ctx, { folderId, ...patch }: Static<typeof FolderParams> & Static<typeof PatchFolderBody>) {
    return this.db.transaction(async (tx) => {
      await this.requireFolder(tx, tenantId, folderId, true);
      if (patch.propertyId) await requireProperty(tx, tenantId, patch.propertyId);
      const now = this.clock.now();
      await folderRepo.update(tx, tenantId, folderId, { ...patch, description: patch.description === '' ? null : patch.description }, now);
      if (patch.propertyId !== undefined) await sourceRepo.setFolderScope(tx, tenantId, folderId, patch.propertyId, now);
      return { folder: await this.folderView(tx, await this.requireFolder(tx, tenantId, folderId)) };
    });
  }

  /**
   * Moves an asset into a folder (appended to its order; the asset takes the folder's scope) or out of it
   * (folderId null; the asset keeps the scope it has). Moving into an inactive folder is 409: it could
   * not be shared there. The folder is locked before the asset, as folder edits do, so the two never deadlock.
   */
  async moveAsset({ tenantId }: Ctx, { sourceId, folderId }: Static<typeof SourceParams> & Static<typeof MoveAssetBody>) {
    return this.db.transaction(async (tx) => {
      const folder = folderId === null ? undefined : await this.requireFolder(tx, tenantId, folderId, true);
      const asset = await sourceRepo.get(tx, tenantId, sourceId, true);
      if (!asset || asset.kind !== 'asset') throw notFound('asset');
      if (folder && !folder.active) throw conflict('the folder is inactive; activate it before moving assets into it', { folderId: folder.id });
      if (asset.folder_id !== (folder?.id ?? null)) {
        await sourceRepo.moveToFolder(tx, tenantId, asset.id, folder ? { id: folder.id, propertyId: folder.property_id } : null, this.clock.now());
      }
      return { asset: assetView((await sourceRepo.get(tx, tenantId, sourceId))!) };
    });
  }

  /** The folder a share link names, or 404 when the signature, the version or the folder's state does not hold. */
  private async sharedFolder(folderId: string, version: number, sig: string): Promise<FolderRow> {
    const expected = Buffer.from(this.signature(folderId, version));
    const given = Buffer.from(sig);
    const folder = expected.length === given.length && timingSafeEqual(expected, given) ? await folderRepo.getById(this.db, folderId) : undefined;
    if (!folder || !folder.active || folder.share_token_version !== version) throw notFound('shared folder');
    return folder;
  }

  /** What a share link shows: the folder and its ready, active assets in folder order, each with a link to its bytes. */
  async shareListing(folderId: string, version: number, sig: string) {
    const folder = await this.sharedFolder(folderId, version, sig);
    const assets = await sourceRepo.sharedAssets(this.db, folder.id);
    const query = this.query(folder);
    return {
      folder: { folderId: folder.id, title: folder.title, description: folder.description ?? undefined, assetCount: assets.length },
      assets: assets.map((a) => ({
        sourceId: a.id,
        title: a.title ?? '',
        description: a.description ?? undefined,
        mediaType: a.media_type ?? mediaTypeOf(a.detected_content_type ?? ''),
        contentType: a.detected_content_type ?? a.file_content_type ?? 'application/octet-stream',
        filename: a.file_name ?? a.id,
        sizeBytes: a.file_size ?? 0,
        url: `/share/folders/${encodeURIComponent(folder.id)}/assets/${encodeURIComponent(a.id)}?${query}`,
      })),
    };
  }

  /** The bytes of one shared asset, typed as validation found them. */
  async sharedAsset(folderId: string, sourceId: string, version: number, sig: string): Promise<{ row: SourceRow; bytes: Buffer }> {
    const folder = await this.sharedFolder(folderId, version, sig);
    const row = (await sourceRepo.sharedAssets(this.db, folder.id)).find((a) => a.id === sourceId);
    const bytes = row?.blob_key ? await this.blobs.get(row.blob_key) : undefined;
    if (!row || !bytes) throw notFound('shared asset');
    return { row, bytes };
  }
}
