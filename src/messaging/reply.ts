import type { Static } from 'typebox';
import type { ChannelKind } from '../channels/repo.js';
import type { Clock } from '../clock.js';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import type { ConversationParams } from '../conversations/schema.js';
import { requireConversation } from '../conversations/service.js';
import type { MessageParams, ReactionAccepted, ReactionBody, ReplyAccepted, ReplyBody } from '../conversations/message-schema.js';
import type { BlobStore } from '../knowledge/blob-key.js';
import { mediaBlobKey } from '../channels/media-download.js';
import type { MediaKind } from '../channels/providers/types.js';
import { newId } from '../ids.js';
import { attachmentRepo } from './attachment-repo.js';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { DomainError, conflict, invalid, notFound } from '../errors.js';
import { idempotencyRepo } from '../platform/idempotency-repo.js';
import { answerTaken, keyLifetime, requestHash, type IdempotencyKeyUse, type StoredResponse } from '../platform/idempotency.js';
import { jobsChannel } from '../jobs/queue.js';
import { GroupCommit } from '../util/group-commit.js';
import { WEBHOOKS_CHANNEL } from '../webhooks/events.js';
import { SEND_TASK, type OutboundKind, type OutboundQueue } from './outbound.js';
import { outboundRepo, type OutboundMessage, type ReplyClaim, type ReplyOutcome } from './outbound-repo.js';

type ReplyInput = Static<typeof ConversationParams> & Static<typeof ReplyBody> & { idempotency: IdempotencyKeyUse };
type ReactInput = Static<typeof MessageParams> & Static<typeof ReactionBody> & { idempotency: IdempotencyKeyUse };
type Accepted = Static<typeof ReplyAccepted>;
type ReactionAcceptedBody = Static<typeof ReactionAccepted>;

/** With an attachment, `text` is its caption (decisions 7.2), counted in code points. */
export const MAX_CAPTION_LENGTH = 1024;

/** Conversations whose channel a node remembers (docs/decisions.md, "Replies in one statement"). */
const REMEMBERED_CONVERSATIONS = 10_000;
/** Replies written together at most, and groups written at once (docs/decisions.md, "Replies and sends in groups"). */
const REPLY_GROUP = { maxGroup: 32, maxInFlight: 2, minBeside: 8 };

/** A reply (text, an attachment, an answer to a message) or a reaction inside a conversation, through the same outbound pipeline as a conversation start. */
export class ReplyService {
  private readonly channels: ConversationChannels;
  private readonly writes: GroupCommit<ReplyClaim, ReplyOutcome>;
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly outbound: OutboundQueue,
    private readonly blobs: BlobStore,
  ) {
    this.channels = new ConversationChannels(db, REMEMBERED_CONVERSATIONS);
    const wake = { jobs: db.notifyName(jobsChannel(SEND_TASK)), webhooks: db.notifyName(WEBHOOKS_CHANNEL) };
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
   *
   * With `assetSourceId` the reply carries the asset as an attachment (decisions 7.2; `text` is its caption):
   * the asset's bytes are copied under the message's own key before the statement, so the send job sends them
   * even if the asset is deleted meanwhile (a copy no reply kept is deleted again).
   */
  async reply(ctx: Ctx, { idempotency, conversationId, text, assetSourceId, replyToMessageId }: ReplyInput): Promise<StoredResponse<Accepted>> {
    if (text === undefined && assetSourceId === undefined) throw invalid('body.text', 'a reply needs text, assetSourceId or both');
    if (text !== undefined && !text.trim()) throw invalid('body.text', 'must contain a non-space character');
    if (assetSourceId !== undefined && text !== undefined && codePoints(text) > MAX_CAPTION_LENGTH) {
      throw invalid('body.text', `a caption is at most ${MAX_CAPTION_LENGTH} characters (Unicode code points)`);
    }
    const { tenantId } = ctx;
    const channel = await this.channels.of(tenantId, conversationId);
    if (replyToMessageId !== undefined && !(await attachmentRepo.hasMessage(this.db, tenantId, conversationId, replyToMessageId))) {
      throw new DomainError('M2M_INVALID_REQUEST', 'body.replyToMessageId: no message with this id in the conversation', {
        reason: 'reply_to_not_found',
        issues: [{ path: 'body.replyToMessageId', message: 'no message with this id in the conversation' }],
      });
    }
    const hash = requestHash({ conversationId, text, ...(assetSourceId ? { assetSourceId } : {}), ...(replyToMessageId ? { replyToMessageId } : {}) });
    if (assetSourceId !== undefined) {
      // A retry of an attachment reply answers what its key stored, even when the asset has gone since, and copies nothing.
      const earlier = await idempotencyRepo.claim(this.db, { tenantId, operation: idempotency.operation, key: idempotency.key }, this.clock.now());
      if (earlier.outcome === 'taken') return answerTaken<Accepted>(idempotency.key, hash, earlier.stored);
    }
    const messageId = newId('msg');
    const kind = assetSourceId === undefined ? { type: 'text' as const, ...(replyToMessageId ? { replyToMessageId } : {}) } : await this.attach(tenantId, assetSourceId, messageId, replyToMessageId);
    const now = this.clock.now();
    const message = this.outbound.prepare(now, { tenantId, conversationId, channelId: channel.channelId, channelKind: channel.kind, recipientPhone: null, text: text ?? '', messageId, kind });
    const accepted: Accepted = { conversationId, messageId: message.message_id, replyId: message.message_id, requestEventId: message.request_id };
    if (kind.type === 'text') return (await this.write(ctx, channel, message, idempotency, hash, accepted)).answer;
    // The copy stays only with a reply that was written; a refusal or a replayed key drops it.
    const dropCopy = () => this.blobs.delete(mediaBlobKey(tenantId, messageId)).catch(() => undefined);
    let outcome: { answer: StoredResponse<Accepted>; fresh: boolean };
    try {
      outcome = await this.write(ctx, channel, message, idempotency, hash, accepted);
    } catch (error) {
      // A database that did not answer may still have written the reply: its copy is kept then.
      if (error instanceof DomainError) await dropCopy();
      throw error;
    }
    if (!outcome.fresh) await dropCopy();
    return outcome.answer;
  }

  /**
   * A reaction to a message of the conversation (decisions 7.2): an outbound message of type `reaction`, sent by the
   * send job, under the same rules and window as a reply (the same statement). `emoji` '' removes the reaction.
   */
  async react(ctx: Ctx, { idempotency, conversationId, messageId, emoji }: ReactInput): Promise<StoredResponse<ReactionAcceptedBody>> {
    if (emoji !== '' && !isOneEmoji(emoji)) throw invalid('body.emoji', 'must be exactly one emoji (or empty to remove the reaction)');
    const { tenantId } = ctx;
    const channel = await this.channels.of(tenantId, conversationId);
    if (!(await attachmentRepo.hasMessage(this.db, tenantId, conversationId, messageId))) throw notFound('message');
    const now = this.clock.now();
    const message = this.outbound.prepare(now, {
      tenantId,
      conversationId,
      channelId: channel.channelId,
      channelKind: channel.kind,
      recipientPhone: null,
      text: '',
      kind: { type: 'reaction', reaction: { emoji, targetMessageId: messageId } },
    });
    const accepted: ReactionAcceptedBody = { conversationId, messageId, requestEventId: message.request_id };
    const hash = requestHash({ conversationId, messageId, emoji });
    return (await this.write(ctx, channel, message, idempotency, hash, accepted)).answer;
  }

  private async write<T>(
    ctx: Ctx,
    channel: ConversationChannel,
    message: OutboundMessage,
    idempotency: IdempotencyKeyUse,
    hash: string,
    accepted: T,
  ): Promise<{ answer: StoredResponse<T>; fresh: boolean }> {
    const result = await this.writes.submit({
      message,
      operation: idempotency.operation,
      key: idempotency.key,
      requestHash: hash,
      response: accepted,
      ...keyLifetime(new Date(message.at)),
    });
    switch (result.outcome) {
      case 'queued':
        this.db.wake(jobsChannel(SEND_TASK));
        if (result.deliveries > 0) this.db.wake(WEBHOOKS_CHANNEL);
        return { answer: { status: 202, body: accepted, replayed: false }, fresh: true };
      case 'taken':
        return { answer: answerTaken<T>(idempotency.key, hash, result.stored), fresh: false };
      case 'missing':
        this.channels.forget(ctx.tenantId, message.conversation_id);
        throw notFound('conversation');
      case 'refused':
        throw refusalError(result, channel.kind);
    }
  }

  /** The asset as the reply's attachment: eligible (decisions 7.2) or 409 asset_not_eligible; its bytes copied under the message. */
  private async attach(tenantId: string, assetSourceId: string, messageId: string, replyToMessageId: string | undefined): Promise<OutboundKind> {
    const asset = await attachmentRepo.asset(this.db, tenantId, assetSourceId);
    if (!asset) {
      throw new DomainError('M2M_INVALID_REQUEST', 'body.assetSourceId: no knowledge asset with this id', {
        reason: 'asset_not_found',
        issues: [{ path: 'body.assetSourceId', message: 'no knowledge asset with this id' }],
      });
    }
    const bytes = asset.eligible && asset.blob_key ? await this.blobs.get(asset.blob_key) : undefined;
    if (!asset.eligible || !bytes) {
      throw conflict('the asset cannot be attached: it must be active, validated (validationStatus ready) and in an active folder or none', {
        reason: 'asset_not_eligible',
        assetSourceId,
        active: asset.active,
        validationStatus: asset.validation_status,
        ...(asset.folder_active !== null ? { folderActive: asset.folder_active } : {}),
      });
    }
    await this.blobs.put(mediaBlobKey(tenantId, messageId), bytes);
    const contentType = asset.content_type ?? 'application/octet-stream';
    const media = { contentType, sizeBytes: bytes.length, filename: asset.file_name ?? assetSourceId, status: 'ready' as const };
    return { type: mediaKindOf(contentType), media, ...(replyToMessageId ? { replyToMessageId } : {}) };
  }
}

/** The message type of an attachment, from its content type: image, video, audio, else document. */
export function mediaKindOf(contentType: string): MediaKind {
  const major = contentType.split('/')[0].toLowerCase();
  return major === 'image' || major === 'video' || major === 'audio' ? major : 'document';
}

function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * One emoji as Unicode defines it (RGI_Emoji: a single one, a ZWJ sequence, a flag, a keycap, with its modifiers),
 * or one pictographic character written without its emoji variation selector (❤ as well as ❤️).
 */
// Built from a string: the compiler targets an ECMAScript before the `v` flag, which Node 20 runs.
const ONE_EMOJI = new RegExp('^(?:\\p{RGI_Emoji}|\\p{Extended_Pictographic})$', 'v');
export function isOneEmoji(text: string): boolean {
  return ONE_EMOJI.test(text);
}

/** The answer to a refusal: conversation_replies decided it (send_refusal, reply_window) and gives the facts to explain it. */
export function refusalError(refused: Extract<ReplyOutcome, { outcome: 'refused' }>, channelKind: ChannelKind): DomainError {
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
