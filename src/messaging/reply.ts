import type { Static } from 'typebox';
import type { Clock } from '../clock.js';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { channelRepo } from '../channels/repo.js';
import type { ConversationParams } from '../conversations/schema.js';
import type { ReplyAccepted, ReplyBody } from '../conversations/message-schema.js';
import { conversationRepo } from '../conversations/repo.js';
import { requireConversation } from '../conversations/service.js';
import { DomainError, conflict, invalid } from '../errors.js';
import { runIdempotent } from '../http/idempotency.js';
import { replyWindowRefusal } from './channel-rules.js';
import type { OutboundQueue } from './outbound.js';

type ReplyInput = Static<typeof ConversationParams> & Static<typeof ReplyBody> & { idempotencyKey: string };

/** A plain-text reply inside a conversation, through the same outbound pipeline as a conversation start. */
export class ReplyService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly outbound: OutboundQueue,
  ) {}

  /**
   * Checks the channel's rules under the conversation's lock, then writes the message, its request, the send
   * job and message.created in one transaction with the stored response. A refusal writes nothing and
   * releases the Idempotency-Key.
   */
  async reply(ctx: Ctx, { idempotencyKey, conversationId, text }: ReplyInput) {
    if (!text.trim()) throw invalid('body.text', 'must contain a non-space character');
    const { tenantId } = ctx;
    const result = await runIdempotent<Static<typeof ReplyAccepted>>(this.db, this.clock, { tenantId, operation: 'conversations.reply', key: idempotencyKey, request: { conversationId, text } }, async (tx) => {
      const conversation = await requireConversation(tx, tenantId, conversationId, true);
      const channel = await channelRepo.get(tx, tenantId, conversation.channel_id);
      if (!channel?.available) {
        throw new DomainError('M2M_INVALID_REQUEST', 'the conversation channel is not available for sending', {
          reason: 'channel_unavailable',
          issues: [{ path: 'path.conversationId', message: 'its channel is not available' }],
        });
      }
      const contact = await conversationRepo.getContact(tx, tenantId, conversation.contact_id);
      if (contact?.opted_out) throw conflict('the contact has opted out', { reason: 'recipient_opted_out' });
      const now = this.clock.now();
      const refusal = replyWindowRefusal(channel.kind, conversation.last_inbound_at, now);
      if (refusal) throw refusal;
      const { replyId, requestEventId } = await this.outbound.queue(tx, now, {
        tenantId,
        conversationId,
        channelId: channel.id,
        channelKind: channel.kind,
        recipientPhone: contact?.phone_e164 ?? null,
        text,
      });
      return { status: 202, body: { conversationId, messageId: replyId, replyId, requestEventId } };
    });
    return result;
  }
}
