import type { Queryable } from '../db/driver.js';

/**
 * The provider says the conversation's customer-service window is closed (WhatsApp 131047, re-engagement):
 * replies are refused until the guest writes again (reply_window, src/messaging/sql/reply_window.sql).
 */
export async function closeWindow(db: Queryable, tenantId: string, conversationId: string, at: Date): Promise<void> {
  await db.query('UPDATE conversations SET window_closed_at = GREATEST(window_closed_at, $3) WHERE id = $1 AND tenant_id = $2', [conversationId, tenantId, at]);
}
