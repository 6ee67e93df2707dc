import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { conflict, notFound } from '../errors.js';
import type { BlobStore } from '../knowledge/blob-key.js';
import { mediaBlobKey } from '../channels/media-download.js';
import { BinaryBody } from '../operations/define.js';
import type { Cursors } from '../platform/cursor.js';
import { iso } from '../util/time.js';
import { MESSAGE_TYPES } from '../events/types.js';
import { messageRepo, type MessageRow } from './message-repo.js';
import type { ListMessagesQuery, MessageParams } from './message-schema.js';
import type { ConversationParams } from './schema.js';
import { requireConversation } from './service.js';
import { conversationView } from './views.js';

/** A message as the public reads answer it (decisions 6.2 and 7.2); provider ids and media URLs stay inside. */
function messageView(row: MessageRow, channel: string) {
  const { media, reaction } = row;
  return {
    messageId: row.id,
    conversationId: row.conversation_id,
    direction: row.direction,
    channel,
    type: messageType(row.type),
    ...(row.text !== '' ? { text: row.text } : {}),
    createdAt: iso(row.created_at)!,
    source: row.source ?? (row.direction === 'inbound' ? 'channel' : 'api'),
    ...(media
      ? { media: { contentType: media.contentType, ...(media.sizeBytes !== undefined ? { sizeBytes: media.sizeBytes } : {}), ...(media.filename ? { filename: media.filename } : {}), status: media.status, ...(media.status === 'failed' && media.reason ? { reason: media.reason } : {}) } }
      : {}),
    ...(row.location ? { location: row.location } : {}),
    ...(row.interactive ? { interactive: row.interactive } : {}),
    ...(reaction ? { reaction: { emoji: reaction.emoji, ...(reaction.targetMessageId ? { targetMessageId: reaction.targetMessageId } : {}) } } : {}),
    ...(row.reply_to_message_id ? { replyToMessageId: row.reply_to_message_id } : {}),
    ...(row.request_event_id ? { requestEventId: row.request_event_id } : {}),
    ...(row.status ? { status: row.status } : {}),
    ...(row.read_at ? { readAt: iso(row.read_at)! } : {}),
  };
}

function messageType(type: string): (typeof MESSAGE_TYPES)[number] {
  return MESSAGE_TYPES.find((known) => known === type) ?? 'unsupported';
}

/** What a conversation holds: the conversation itself and its messages (the content webhooks only name). */
export class ConversationContentService {
  constructor(
    private readonly db: Db,
    private readonly cursors: Cursors,
    private readonly blobs: BlobStore,
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

  /**
   * A message's media bytes (decisions 7.2): inbound media the download job stored, or an outbound attachment's
   * copy. No media: 404; still downloading or failed: 409 with `media_pending` / `media_failed`.
   */
  async getMedia({ tenantId }: Ctx, { conversationId, messageId }: Static<typeof MessageParams>): Promise<BinaryBody> {
    const found = await messageRepo.get(this.db, tenantId, conversationId, messageId);
    if (!found) throw notFound('conversation');
    const [row] = found.messages;
    if (!row) throw notFound('message');
    const { media } = row;
    if (!media) throw notFound('media');
    if (media.status === 'pending') throw conflict('the media is still being downloaded from the channel; try again shortly', { reason: 'media_pending' });
    if (media.status === 'failed') {
      throw conflict(`the media could not be downloaded from the channel (${media.reason ?? 'unknown'})`, { reason: 'media_failed', mediaReason: media.reason ?? 'unknown' });
    }
    const bytes = await this.blobs.get(mediaBlobKey(tenantId, messageId));
    if (!bytes) throw conflict('the media bytes are no longer stored', { reason: 'media_failed', mediaReason: 'missing' });
    return new BinaryBody(bytes, media.contentType, media.filename ?? `${messageId}${extensionOf(media.contentType)}`);
  }
}

/** A file extension for a media type without a file name (WhatsApp images and voice notes have none). */
function extensionOf(contentType: string): string {
  const subtype = contentType.split(';')[0].split('/')[1]?.trim().toLowerCase() ?? '';
  const known: Record<string, string> = { jpeg: '.jpg', png: '.png', webp: '.webp', gif: '.gif', mp4: '.mp4', ogg: '.ogg', mpeg: '.mp3', aac: '.aac', amr: '.amr', pdf: '.pdf', '3gpp': '.3gp' };
  return known[subtype] ?? '';
}
