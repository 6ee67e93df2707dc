import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { iso } from '../util/time.js';
import { messageRepo, type MessageRow } from './message-repo.js';
import type { ListMessagesQuery, MessageParams } from './message-schema.js';
import type { ConversationParams } from './schema.js';
import { requireConversation } from './service.js';
import { conversationView } from './views.js';

function messageView(row: MessageRow, channel: string) {
  return {
    messageId: row.id,
    conversationId: row.conversation_id,
    direction: row.direction,
    channel,
    text: row.text,
    createdAt: iso(row.created_at)!,
    ...(row.request_event_id ? { requestEventId: row.request_event_id } : {}),
    ...(row.status ? { status: row.status } : {}),
  };
}

/** What a conversation holds: the conversation itself and its messages (the content webhooks only name). */
export class ConversationContentService {
  constructor(
    private readonly db: Db,
    private readonly cursors: Cursors,
  ) {}

  async get({ tenantId }: Ctx, { conversationId }: Static<typeof ConversationParams>) {
    return conversationView(await requireConversation(this.db, tenantId, conversationId));
  }

  async listMessages({ tenantId }: Ctx, { conversationId, limit = 25, cursor, direction }: Static<typeof ConversationParams> & Static<typeof ListMessagesQuery>) {
    const binding = { tenantId, conversationId, direction: direction ?? 'all' };
    const before = cursor
      ? await this.cursors.decodeAfter<{ at: string; id: string }>('messages', binding, cursor, () => requireConversation(this.db, tenantId, conversationId))
      : undefined;
    const found = await messageRepo.page(this.db, { tenantId, conversationId, direction }, { limit: limit + 1, before });
    if (!found) throw notFound('conversation');
    const { page, hasMore, next } = this.cursors.page('messages', binding, found.messages, limit, (last) => ({ at: iso(last.created_at), id: last.id }));
    return { messages: page.map((row) => messageView(row, found.channelKind)), ...next, hasMore };
  }

  async getMessage({ tenantId }: Ctx, { conversationId, messageId }: Static<typeof MessageParams>) {
    const found = await messageRepo.get(this.db, tenantId, conversationId, messageId);
    if (!found) throw notFound('conversation');
    const [row] = found.messages;
    if (!row) throw notFound('message');
    return { message: messageView(row, found.channelKind) };
  }
}
