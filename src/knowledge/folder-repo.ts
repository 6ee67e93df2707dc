import type { Queryable } from '../db/driver.js';
import { cursorText, olderThan } from '../db/sql.js';

export interface FolderRow {
  id: string;
  tenant_id: string;
  title: string;
  description: string | null;
  property_id: string | null;
  property_name: string | null;
  active: boolean;
  share_token_version: number;
  created_at: Date;
  updated_at: Date;
}

export interface FolderPatch {
  title?: string;
  /** null clears it. */
  description?: string | null;
  /** null makes the folder global. */
  propertyId?: string | null;
  active?: boolean;
}

const select = `SELECT f.*, p.name AS property_name FROM knowledge_asset_folders f LEFT JOIN properties p ON p.id = f.property_id`;

export const folderRepo = {
  async insert(db: Queryable, row: { id: string; tenantId: string; title: string; description: string | null; propertyId: string | null; now: Date }): Promise<void> {
    await db.query(
      `INSERT INTO knowledge_asset_folders (id, tenant_id, title, description, property_id, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $6)`,
      [row.id, row.tenantId, row.title, row.description, row.propertyId, row.now],
    );
  },

  /** The folder, locked for the rest of the transaction when `lock` is set (moves and edits serialise on it). */
  async get(db: Queryable, tenantId: string, folderId: string, lock = false): Promise<FolderRow | undefined> {
    const rows = await db.query<FolderRow>(`${select} WHERE f.tenant_id = $1 AND f.id = $2${lock ? ' FOR UPDATE OF f' : ''}`, [tenantId, folderId]);
    return rows[0];
  },

  /**
   * One page of the tenant's folders, newest first, after the keyset position `after`; `created_key` is the
   * exact (microsecond) creation time the next cursor carries.
   */
  async list(db: Queryable, tenantId: string, page: { limit: number; after?: { at: string; id: string } }): Promise<Array<FolderRow & { created_key: string }>> {
    const params: unknown[] = [tenantId];
    const where = ['f.tenant_id = $1'];
    if (page.after) where.push(olderThan(params, 'f.created_at', 'f.id', page.after));
    params.push(page.limit);
    return db.query<FolderRow & { created_key: string }>(
      `SELECT f.*, p.name AS property_name, ${cursorText('f.created_at')} AS created_key
       FROM knowledge_asset_folders f LEFT JOIN properties p ON p.id = f.property_id
       WHERE ${where.join(' AND ')} ORDER BY f.created_at DESC, f.id DESC LIMIT $${params.length}`,
      params,
    );
  },

  /** A folder found by id alone: share links carry no tenant, their signature vouches for the id. */
  async getById(db: Queryable, folderId: string): Promise<FolderRow | undefined> {
    return (await db.query<FolderRow>(`${select} WHERE f.id = $1`, [folderId]))[0];
  },

  /** Applies the supplied fields; turning a folder inactive bumps the share token version (revoking its links). */
  async update(db: Queryable, tenantId: string, folderId: string, patch: FolderPatch, now: Date): Promise<void> {
    await db.query(
      `UPDATE knowledge_asset_folders SET
         title = coalesce($2, title),
         description = CASE WHEN $3 THEN $4 ELSE description END,
         property_id = CASE WHEN $5 THEN $6 ELSE property_id END,
         share_token_version = CASE WHEN active AND $7 = false THEN share_token_version + 1 ELSE share_token_version END,
         active = coalesce($7, active),
         updated_at = $8
       WHERE id = $1 AND tenant_id = $9`,
      [folderId, patch.title ?? null, patch.description !== undefined, patch.description ?? null, patch.propertyId !== undefined, patch.propertyId ?? null,
        patch.active ?? null, now, tenantId],
    );
  },
};
