import type { Static } from 'typebox';
import type { ChannelKind } from '../channels/repo.js';
import type { Clock } from '../clock.js';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import type { ConversationParams } from '../conversations/schema.js';
import { requireConversation } from '../conversations/service.js';
import type { ReplyAccepted, ReplyBody } from '../conversations/message-schema.js';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { DomainError, conflict, invalid, notFound } from '../errors.js';
import { answerTaken, keyLifetime, requestHash, type IdempotencyKeyUse, type StoredResponse } from '../platform/idempotency.js';
import { JOBS_CHANNEL } from '../jobs/queue.js';
import { GroupCommit } from '../util/group-commit.js';
import { WEBHOOKS_CHANNEL } from '../webhooks/events.js';
import type { OutboundQueue } from './outbound.js';
import { outboundRepo, type ReplyClaim, type ReplyOutcome } from './outbound-repo.js';

type ReplyInput = Static<typeof ConversationParams> & Static<typeof ReplyBody> & { idempotency: IdempotencyKeyUse };
type Accepted = Static<typeof ReplyAccepted>;

/** Conversations whose channel a node remembers (docs/decisions.md, "Replies in one statement"). */
const REMEMBERED_CONVERSATIONS = 10_000;
/** Replies written together at most, and groups written at once (docs/decisions.md, "Replies and sends in groups"). */
const REPLY_GROUP = { maxGroup: 32, maxInFlight: 2, minBeside: 8 };

/** A plain-text reply inside a conversation, through the same outbound pipeline as a conversation start. */
export class ReplyService {
  private readonly channels: ConversationChannels;
  private readonly writes: GroupCommit<ReplyClaim, ReplyOutcome>;
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly outbound: OutboundQueue,
  ) {
    this.channels = new ConversationChannels(db, REMEMBERED_CONVERSATIONS);
    const wake = { jobs: db.notifyName(JOBS_CHANNEL), webhooks: db.notifyName(WEBHOOKS_CHANNEL) };
    this.writes = new GroupCommit((claims) => outboundRepo.replies(db, claims, wake), {
      ...REPLY_GROUP,
      retryAlone: (error) => !isDatabaseUnavailable(error),
    });
  }

  /**
   * Written by conversation_replies (src/messaging/sql/conversation_replies.sql), together with the replies that arrive meanwhile, in one
   * statement committed on its own: the Idempotency-Key's earlier use, the channel's rules under the
   * conversation's lock, then the message, its request, the send job, message.created and the stored response.
   * A refusal writes nothing and leaves the key free.
   */
  async reply(ctx: Ctx, { idempotency, conversationId, text }: ReplyInput): Promise<StoredResponse<Accepted>> {
    if (!text.trim()) throw invalid('body.text', 'must contain a non-space character');
    const { tenantId } = ctx;
    const channel = await this.channels.of(tenantId, conversationId);
    const now = this.clock.now();
    const message = this.outbound.prepare(now, { tenantId, conversationId, channelId: channel.channelId, channelKind: channel.kind, recipientPhone: null, text });
    const accepted: Accepted = { conversationId, messageId: message.message_id, replyId: message.message_id, requestEventId: message.request_id };
    const hash = requestHash({ conversationId, text });
    const result = await this.writes.submit({
      message,
      operation: idempotency.operation,
      key: idempotency.key,
      requestHash: hash,
      response: accepted,
      ...keyLifetime(now),
    });
    switch (result.outcome) {
      case 'queued':
        this.db.wake(JOBS_CHANNEL);
        if (result.deliveries > 0) this.db.wake(WEBHOOKS_CHANNEL);
        return { status: 202, body: accepted, replayed: false };
      case 'taken':
        return answerTaken<Accepted>(idempotency.key, hash, result.stored);
      case 'missing':
        this.channels.forget(tenantId, conversationId);
        throw notFound('conversation');
      case 'refused':
        throw refusalError(result, channel.kind);
    }
  }
}

/** The answer to a refusal: conversation_replies decided it (send_refusal, reply_window) and gives the facts to explain it. */
function refusalError(refused: Extract<ReplyOutcome, { outcome: 'refused' }>, channelKind: ChannelKind): DomainError {
  switch (refused.refusal) {
    case 'channel_unavailable':
      return new DomainError('M2M_INVALID_REQUEST', 'the conversation channel is not available for sending', {
        reason: 'channel_unavailable',
        issues: [{ path: 'path.conversationId', message: 'its channel is not available' }],
      });
    case 'recipient_no_consent':
      return conflict('the contact has not given consent to be contacted', { reason: 'recipient_no_consent' });
    case 'recipient_opted_out':
      return conflict('the contact has opted out', { reason: 'recipient_opted_out' });
    case 'outside_customer_service_window': {
      const { windowHours, lastInboundAt, windowClosedAt } = refused;
      return conflict(
        lastInboundAt && windowClosedAt
          ? `the ${windowHours}-hour window after the contact's last message closed at ${windowClosedAt.toISOString()}; start the conversation again with a template`
          : `the contact has not written on this conversation, so no ${windowHours}-hour window is open; start the conversation with a template`,
        {
          reason: 'outside_customer_service_window',
          channel: channelKind,
          windowHours,
          ...(lastInboundAt && windowClosedAt ? { lastInboundAt: lastInboundAt.toISOString(), windowClosedAt: windowClosedAt.toISOString() } : {}),
        },
      );
    }
  }
}

interface ConversationChannel {
  channelId: string;
  kind: ChannelKind;
}

/**
 * The channel of each conversation replied to lately, so that a reply needs no read before its one statement.
 * Facts that never change (a conversation keeps its channel, a channel its kind); what can change (the channel's
 * availability, the contact's opt-out, the window) is checked by that statement. Bounded: the least recently
 * used entry goes first.
 */
class ConversationChannels {
  private readonly entries = new Map<string, ConversationChannel>();
  constructor(
    private readonly db: Db,
    private readonly capacity: number,
  ) {}

  /** The conversation's channel; 404 when the tenant has no such conversation. */
  async of(tenantId: string, conversationId: string): Promise<ConversationChannel> {
    const key = `${tenantId}/${conversationId}`;
    const known = this.entries.get(key);
    if (known) {
      this.entries.delete(key);
      this.entries.set(key, known);
      return known;
    }
    const conversation = await requireConversation(this.db, tenantId, conversationId);
    const channel = { channelId: conversation.channel_id, kind: conversation.channel_kind };
    this.entries.set(key, channel);
    const oldest = this.entries.keys().next();
    if (this.entries.size > this.capacity && !oldest.done) this.entries.delete(oldest.value);
    return channel;
  }

  forget(tenantId: string, conversationId: string): void {
    this.entries.delete(`${tenantId}/${conversationId}`);
  }
}
