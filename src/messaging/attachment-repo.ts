import type { Queryable } from '../db/driver.js';

/** A knowledge asset as a reply's attachment sees it (decisions 7.2). */
export interface AttachableAsset {
  id: string;
  /** Null when the bytes are gone (never, for an asset that exists). */
  blob_key: string | null;
  file_name: string | null;
  /** What validation detected, else what the upload said. */
  content_type: string | null;
  file_size: number | null;
  /** The one rule of decisions 7.2: active, validationStatus ready, and its folder (if any) active. */
  eligible: boolean;
  active: boolean;
  validation_status: string | null;
  folder_active: boolean | null;
}

/** Messages a reply or reaction names, read by id within their conversation. */
export const attachmentRepo = {
  async asset(db: Queryable, tenantId: string, sourceId: string): Promise<AttachableAsset | undefined> {
    const rows = await db.query<AttachableAsset>(
      `SELECT s.id, s.blob_key, s.file_name, COALESCE(s.detected_content_type, s.file_content_type) AS content_type, s.file_size,
              s.active, s.validation_status, f.active AS folder_active,
              s.active AND s.validation_status = 'ready' AND (s.folder_id IS NULL OR COALESCE(f.active, false)) AS eligible
       FROM knowledge_sources s LEFT JOIN knowledge_asset_folders f ON f.id = s.folder_id AND f.tenant_id = s.tenant_id
       WHERE s.tenant_id = $1 AND s.id = $2 AND s.kind = 'asset'`,
      [tenantId, sourceId],
    );
    return rows[0];
  },

  /** Whether the conversation holds the message. */
  async hasMessage(db: Queryable, tenantId: string, conversationId: string, messageId: string): Promise<boolean> {
    const rows = await db.query('SELECT 1 FROM messages WHERE tenant_id = $1 AND conversation_id = $2 AND id = $3', [tenantId, conversationId, messageId]);
    return rows.length > 0;
  },
};
