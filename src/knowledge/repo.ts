import type { Queryable } from '../db/driver.js';
import { cursorText, isoText, olderThan } from '../db/sql.js';
import type { Chunk } from './chunker.js';

export type SourceKind = 'text' | 'file' | 'url' | 'asset' | 'website' | 'website_page';
export type ValidationStatus = 'unsupported' | 'pending' | 'ready' | 'blocked' | 'failed';

export interface CreatedBy {
  id: string;
  displayName: string;
  email?: string;
}

/** A source's columns; `Stamp` is how its timestamps arrive (see SourceRow and InventoryRow). */
interface SourceColumns<Stamp> {
  id: string;
  tenant_id: string;
  kind: SourceKind;
  title: string | null;
  text: string | null;
  url: string | null;
  active: boolean;
  property_id: string | null;
  property_name: string | null;
  preview: string | null;
  chunk_count: number;
  tokens: number;
  ingest_status: 'pending' | 'ready' | 'failed';
  ingest_error: string | null;
  blob_key: string | null;
  file_name: string | null;
  file_content_type: string | null;
  file_size: number | null;
  uploaded_at: Stamp | null;
  description: string | null;
  media_type: 'image' | 'document' | null;
  validation_status: ValidationStatus | null;
  validation_findings: string[] | null;
  detected_content_type: string | null;
  folder_id: string | null;
  folder_position: number | null;
  website_id: string | null;
  website_generation_id: string | null;
  canonical_url: string | null;
  path: string | null;
  enabled: boolean | null;
  display_order: number | null;
  created_by: CreatedBy | null;
  created_at: Stamp;
  updated_at: Stamp;
}

/** A source as `SELECT *` returns it: timestamps as Dates. */
export type SourceRow = SourceColumns<Date>;

/**
 * An inventory row: timestamps selected as ISO 8601 text (printed as the API prints them, not parsed into
 * Dates to be printed again), plus its exact (microsecond) creation time as text for the keyset cursor.
 */
export type InventoryRow = SourceColumns<string> & { created_key: string };

/** Either form: what the views print. */
export type AnySourceRow = SourceRow | InventoryRow;

export interface NewSource {
  id: string;
  tenantId: string;
  kind: 'text' | 'file' | 'url' | 'asset';
  title: string;
  text?: string | null;
  url?: string | null;
  active: boolean;
  propertyId: string | null;
  preview?: string | null;
  ingestStatus: 'pending' | 'ready';
  file?: { blobKey: string; filename: string; contentType: string; size: number };
  asset?: { description: string | null; mediaType: 'image' | 'document'; folderId: string | null };
  createdBy: CreatedBy;
  now: Date;
}

export interface InventoryFilter {
  tenantId: string;
  kinds?: SourceKind[];
  active?: boolean;
  /** null: global only; a property id: that property only; undefined: all. */
  propertyId?: string | null;
  /** A LIKE pattern (already escaped and lowercased) for search_text. */
  pattern?: string;
}

/** Columns every read returns: the source, its property's name. */
const columns = `s.*, p.name AS property_name`;
const from = `knowledge_sources s LEFT JOIN properties p ON p.id = s.property_id`;

export const sourceRepo = {
  async insert(db: Queryable, row: NewSource): Promise<void> {
    await db.query(
      `INSERT INTO knowledge_sources (id, tenant_id, kind, title, text, url, active, property_id, preview, ingest_status,
         blob_key, file_name, file_content_type, file_size, uploaded_at, description, media_type, validation_status,
         validation_findings, folder_id, folder_position, created_by, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, CASE WHEN $11::text IS NULL THEN NULL ELSE $19::timestamptz END,
         $15, $16, CASE WHEN $3 = 'asset' THEN 'pending' END, CASE WHEN $3 = 'asset' THEN '[]'::jsonb END, $17,
         CASE WHEN $17::text IS NULL THEN NULL ELSE
           (SELECT coalesce(max(folder_position), 0) + 1 FROM knowledge_sources WHERE folder_id = $17::text) END,
         $18, $19, $19)`,
      [
        row.id, row.tenantId, row.kind, row.title, row.text ?? null, row.url ?? null, row.active, row.propertyId, row.preview ?? null, row.ingestStatus,
        row.file?.blobKey ?? null, row.file?.filename ?? null, row.file?.contentType ?? null, row.file?.size ?? null,
        row.asset?.description ?? null, row.asset?.mediaType ?? null, row.asset?.folderId ?? null, JSON.stringify(row.createdBy), row.now,
      ],
    );
  },

  async get(db: Queryable, tenantId: string, sourceId: string, lock = false): Promise<SourceRow | undefined> {
    const rows = await db.query<SourceRow>(
      `SELECT ${columns} FROM ${from} WHERE s.tenant_id = $1 AND s.id = $2${lock ? ' FOR UPDATE OF s' : ''}`,
      [tenantId, sourceId],
    );
    return rows[0];
  },

  /** Renames a source or switches it on or off (only the supplied fields change). */
  async patch(db: Queryable, tenantId: string, sourceId: string, patch: { title?: string; active?: boolean }, now: Date): Promise<void> {
    await db.query('UPDATE knowledge_sources SET title = coalesce($3, title), active = coalesce($4, active), updated_at = $5 WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      sourceId,
      patch.title ?? null,
      patch.active ?? null,
      now,
    ]);
  },

  /** Deletes a source row; its chunks go with it (ON DELETE CASCADE), and with the row its folder membership. */
  async delete(db: Queryable, tenantId: string, sourceId: string): Promise<void> {
    await db.query('DELETE FROM knowledge_sources WHERE tenant_id = $1 AND id = $2', [tenantId, sourceId]);
  },

  /** Replaces a source's chunks and records the ingestion result, in the caller's transaction. */
  async storeChunks(
    db: Queryable,
    source: { id: string; tenantId: string },
    chunks: Chunk[],
    result: { preview: string | null; now: Date; vectors?: { model: string; vectors: number[][] } },
  ): Promise<void> {
    await db.query('DELETE FROM knowledge_chunks WHERE source_id = $1 AND tenant_id = $2', [source.id, source.tenantId]);
    const batch = 1000;
    const embedded = result.vectors;
    for (let start = 0; start < chunks.length; start += batch) {
      const slice = chunks.slice(start, start + batch);
      // Vectors travel as array literals ("{0.1,-0.2}"): unnest cannot split a 2-D array into rows of 1-D arrays.
      const vectors = slice.map((_, i) => {
        const vector = embedded?.vectors[start + i];
        return vector ? `{${vector.join(',')}}` : null;
      });
      await db.query(
        `INSERT INTO knowledge_chunks (source_id, seq, tenant_id, text, tokens, embedding, embedding_model)
         SELECT $1, seq, $2, text, tokens, vector::real[], CASE WHEN vector IS NULL THEN NULL ELSE $6 END
         FROM unnest($3::int[], $4::text[], $5::int[], $7::text[]) AS c (seq, text, tokens, vector)`,
        [source.id, source.tenantId, slice.map((_, i) => start + i), slice.map((c) => c.text), slice.map((c) => c.tokens), embedded?.model ?? null, vectors],
      );
    }
    await db.query(
      `UPDATE knowledge_sources SET chunk_count = $2, tokens = $3, preview = coalesce($4, preview), ingest_status = 'ready',
         ingest_error = NULL, ingested_at = $5, updated_at = $5 WHERE id = $1 AND tenant_id = $6`,
      [source.id, chunks.length, chunks.reduce((sum, c) => sum + c.tokens, 0), result.preview, result.now, source.tenantId],
    );
  },

  async failIngest(db: Queryable, tenantId: string, sourceId: string, error: string, now: Date): Promise<void> {
    await db.query(
      `UPDATE knowledge_sources SET ingest_status = 'failed', ingest_error = $2, ingested_at = $3, updated_at = $3 WHERE id = $1 AND tenant_id = $4`,
      [sourceId, error.slice(0, 2000), now, tenantId],
    );
  },

  async chunks(db: Queryable, sourceId: string): Promise<Array<{ seq: number; text: string; tokens: number }>> {
    return db.query('SELECT seq, text, tokens FROM knowledge_chunks WHERE source_id = $1 ORDER BY seq', [sourceId]);
  },

  /** Records an asset's validation outcome, unless it was already decided. Returns false when it was. */
  async setValidation(
    db: Queryable,
    tenantId: string,
    sourceId: string,
    result: { status: ValidationStatus; findings: string[]; detectedContentType: string | null; mediaType: 'image' | 'document' | null; now: Date },
  ): Promise<boolean> {
    const rows = await db.query(
      `UPDATE knowledge_sources SET validation_status = $2, validation_findings = $3, detected_content_type = $4,
         media_type = coalesce($5, media_type), updated_at = $6
       WHERE id = $1 AND tenant_id = $7 AND validation_status = 'pending' RETURNING id`,
      [sourceId, result.status, JSON.stringify(result.findings), result.detectedContentType, result.mediaType, result.now, tenantId],
    );
    return rows.length > 0;
  },

  /** Puts an asset into a folder (appended to its order, taking its scope) or takes it out (folder null). */
  async moveToFolder(db: Queryable, tenantId: string, sourceId: string, folder: { id: string; propertyId: string | null } | null, now: Date): Promise<void> {
    await db.query(
      `UPDATE knowledge_sources SET folder_id = $2::text,
         folder_position = CASE WHEN $2::text IS NULL THEN NULL
           ELSE (SELECT coalesce(max(folder_position), 0) + 1 FROM knowledge_sources WHERE folder_id = $2::text AND tenant_id = $5) END,
         property_id = CASE WHEN $2::text IS NULL THEN property_id ELSE $3::text END, updated_at = $4
       WHERE id = $1 AND tenant_id = $5`,
      [sourceId, folder?.id ?? null, folder?.propertyId ?? null, now, tenantId],
    );
  },

  /** The folder's scope change, applied to every asset in it. */
  async setFolderScope(db: Queryable, tenantId: string, folderId: string, propertyId: string | null, now: Date): Promise<void> {
    await db.query('UPDATE knowledge_sources SET property_id = $2, updated_at = $3 WHERE folder_id = $1 AND tenant_id = $4 AND property_id IS DISTINCT FROM $2', [
      folderId,
      propertyId,
      now,
      tenantId,
    ]);
  },

  /** Assets of folders in their folder order. */
  async folderMembers(db: Queryable, folderIds: string[]): Promise<Array<{ folder_id: string; id: string }>> {
    if (folderIds.length === 0) return [];
    return db.query('SELECT folder_id, id FROM knowledge_sources WHERE folder_id = ANY($1::text[]) ORDER BY folder_id, folder_position, id', [folderIds]);
  },

  /** Ready, active assets of a folder in folder order (what a share link shows). */
  async sharedAssets(db: Queryable, folderId: string): Promise<SourceRow[]> {
    return db.query<SourceRow>(
      `SELECT ${columns} FROM ${from} WHERE s.folder_id = $1 AND s.kind = 'asset' AND s.active AND s.validation_status = 'ready'
       ORDER BY s.folder_position, s.id`,
      [folderId],
    );
  },

  /** One inventory page, newest first, keyset after `after`: every kind but website pages. */
  async inventory(db: Queryable, filter: InventoryFilter, page: { limit: number; after?: { at: string; id: string } }): Promise<InventoryRow[]> {
    const params: unknown[] = [filter.tenantId];
    const where = [`s.tenant_id = $1`, `s.kind <> 'website_page'`];
    if (filter.kinds) {
      params.push(filter.kinds);
      where.push(`s.kind = ANY($${params.length}::text[])`);
    }
    if (filter.active !== undefined) {
      params.push(filter.active);
      where.push(`s.active = $${params.length}`);
    }
    if (filter.propertyId === null) where.push('s.property_id IS NULL');
    else if (filter.propertyId !== undefined) {
      params.push(filter.propertyId);
      where.push(`s.property_id = $${params.length}`);
    }
    if (filter.pattern) {
      params.push(filter.pattern);
      where.push(`s.search_text LIKE $${params.length}`);
    }
    if (page.after) {
      where.push(olderThan(params, 's.created_at', 's.id', page.after));
    }
    params.push(page.limit);
    // The inventory leaves out the full text (it carries `preview`); a text source may hold a megabyte.
    return db.query<InventoryRow>(
      `SELECT ${cursorText('s.created_at')} AS created_key, s.id, s.tenant_id, s.kind, s.title, NULL AS text, s.url, s.active, s.property_id, p.name AS property_name, s.preview,
              s.chunk_count, s.tokens, s.ingest_status, s.file_name, s.file_content_type, s.file_size, s.description,
              s.media_type, s.validation_status, s.validation_findings, s.folder_id, s.created_by,
              ${isoText('s.created_at')} AS created_at, ${isoText('s.updated_at')} AS updated_at, ${isoText('s.uploaded_at')} AS uploaded_at
       FROM ${from} WHERE ${where.join(' AND ')} ORDER BY s.created_at DESC, s.id DESC LIMIT $${params.length}`,
      params,
    );
  },
};
