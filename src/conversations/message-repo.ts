import type { Queryable } from '../db/driver.js';
import { olderThan } from '../db/sql.js';
import type { RequestStatus } from '../messaging/repo.js';

export type Direction = 'inbound' | 'outbound';

/** A message with the current status of its send (outbound messages). */
export interface MessageRow {
  id: string;
  conversation_id: string;
  direction: Direction;
  text: string;
  request_event_id: string | null;
  status: RequestStatus | null;
  created_at: Date;
}

// The send status is looked up per returned row (by primary key): a join let the planner, with stale statistics
// on message_requests, scan all of the tenant's sends for every page.
const COLUMNS = `m.id, m.conversation_id, m.direction, m.text, m.request_event_id,
  (SELECT r.status FROM message_requests r WHERE r.id = m.request_event_id AND r.tenant_id = m.tenant_id) AS status, m.created_at
  FROM messages m`;

export const messageRepo = {
  async get(db: Queryable, tenantId: string, conversationId: string, messageId: string): Promise<MessageRow | undefined> {
    const rows = await db.query<MessageRow>(`SELECT ${COLUMNS} WHERE m.tenant_id = $1 AND m.conversation_id = $2 AND m.id = $3`, [tenantId, conversationId, messageId]);
    return rows[0];
  },

  /** A page of a conversation's messages, newest first, keyset before `before` (created_at, id). */
  async page(
    db: Queryable,
    filter: { tenantId: string; conversationId: string; direction?: Direction },
    page: { limit: number; before?: { at: string; id: string } },
  ): Promise<MessageRow[]> {
    const params: unknown[] = [filter.tenantId, filter.conversationId];
    let where = 'm.tenant_id = $1 AND m.conversation_id = $2';
    if (filter.direction) {
      params.push(filter.direction);
      where += ` AND m.direction = $${params.length}`;
    }
    if (page.before) {
      where += ` AND ${olderThan(params, 'm.created_at', 'm.id', page.before)}`;
    }
    params.push(page.limit);
    return db.query<MessageRow>(`SELECT ${COLUMNS} WHERE ${where} ORDER BY m.created_at DESC, m.id DESC LIMIT $${params.length}`, params);
  },
};
