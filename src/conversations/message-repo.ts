import type { Db } from '../db/driver.js';
import { olderThan, pageLimit } from '../db/sql.js';
import type { RequestStatus } from '../messaging/repo.js';
import type { MessageContent, MessageSource } from './repo.js';

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
  type: string;
  source: MessageSource | null;
  media: Required<MessageContent>['media'] | null;
  location: Required<MessageContent>['location'] | null;
  interactive: Required<MessageContent>['interactive'] | null;
  reaction: Required<MessageContent>['reaction'] | null;
  reply_to_message_id: string | null;
  read_at: Date | null;
}

/** Messages of one conversation of the tenant, with the conversation's channel kind. */
export interface ConversationMessages {
  channelKind: string;
  messages: MessageRow[];
}

/** The lateral join's row: a message, or all nulls when the conversation has none matching. */
type JoinedRow = { channel_kind: string } & (MessageRow | Record<keyof MessageRow, null>);

// The send status is looked up per returned row (by primary key): a join let the planner, with stale statistics
// on message_requests, scan all of the tenant's sends for every page.
const COLUMNS = `m.id, m.conversation_id, m.direction, m.text, m.request_event_id,
  (SELECT r.status FROM message_requests r WHERE r.id = m.request_event_id AND r.tenant_id = m.tenant_id) AS status, m.created_at,
  m.type, m.source, m.media, m.location, m.interactive, m.reaction, m.reply_to_message_id, m.read_at
  FROM messages m`;

/**
 * The conversation (its channel kind) and its messages matching `where` in one statement, so a read is one
 * round trip: no row when the conversation is not the tenant's, one row of nulls when no message matches.
 */
async function ofConversation(db: Db, params: unknown[], where: string, tail = ''): Promise<ConversationMessages | undefined> {
  const rows = await db.query<JoinedRow>(
    `SELECT cv.channel_kind, p.* FROM conversations cv
     LEFT JOIN LATERAL (SELECT ${COLUMNS} WHERE m.tenant_id = cv.tenant_id AND m.conversation_id = cv.id AND ${where} ${tail}) p ON true
     WHERE cv.tenant_id = $1 AND cv.id = $2`,
    params,
  );
  if (rows.length === 0) return undefined;
  const messages: MessageRow[] = [];
  // Rows kept as the driver made them, channel_kind and all: every reader goes through messageView, which picks its fields.
  for (const row of rows) if (row.id !== null) messages.push(row);
  return { channelKind: rows[0].channel_kind, messages };
}

export const messageRepo = {
  async get(db: Db, tenantId: string, conversationId: string, messageId: string): Promise<ConversationMessages | undefined> {
    return ofConversation(db, [tenantId, conversationId, messageId], 'm.id = $3');
  },

  /** A page of a conversation's messages, newest first, keyset before `before` (created_at, id). */
  async page(
    db: Db,
    filter: { tenantId: string; conversationId: string; direction?: Direction },
    page: { limit: number; before?: { at: string; id: string } },
  ): Promise<ConversationMessages | undefined> {
    const params: unknown[] = [filter.tenantId, filter.conversationId];
    let where = 'true';
    if (filter.direction) {
      params.push(filter.direction);
      where += ` AND m.direction = $${params.length}`;
    }
    if (page.before) {
      where += ` AND ${olderThan(params, 'm.created_at', 'm.id', page.before)}`;
    }
    return ofConversation(db, params, where, `ORDER BY m.created_at DESC, m.id DESC LIMIT ${pageLimit(page.limit)}`);
  },
};
