import type { Tx } from '../db/driver.js';
import { preview } from '../conversations/inbox.js';
import { newId } from '../ids.js';
import { jobsChannel } from '../jobs/queue.js';
import { WEBHOOKS_CHANNEL, eventRecord } from '../webhooks/events.js';
import { outboundRepo, type OutboundMessage } from './outbound-repo.js';
import type { TaskName } from '../jobs/tasks.js';

export const SEND_TASK = 'messaging.send' satisfies TaskName;

export interface OutboundInput {
  tenantId: string;
  conversationId: string;
  channelId: string;
  channelKind: string;
  /** E.164 phone of the recipient (WhatsApp); null for channels addressed by conversation. */
  recipientPhone: string | null;
  text: string;
  /** The message's id when the caller needs it before (an attachment's bytes are copied under it); else a new one. */
  messageId?: string;
  /** A WhatsApp template message; omitted for a plain reply inside the conversation. */
  template?: { name: string; locale: string };
  /** What the message is beyond its text (decisions 7.2): an attachment, an answer to a message, a reaction. */
  kind?: OutboundKind;
}

/** Media of an outbound message: its bytes are in the blob store under mediaBlobKey(tenant, messageId). */
export interface OutboundMedia {
  contentType: string;
  sizeBytes: number;
  filename: string;
  status: 'ready';
}

export type OutboundKind =
  | { type: 'image' | 'video' | 'audio' | 'document'; media: OutboundMedia; replyToMessageId?: string }
  | { type: 'text'; replyToMessageId?: string }
  | { type: 'reaction'; reaction: { emoji: string; targetMessageId: string } };

/** The conversation's preview of a message: its text, else what it is (an attachment, a reaction's emoji). */
function previewOf(text: string, kind: OutboundKind | undefined): string {
  if (text !== '') return preview(text);
  if (kind?.type === 'reaction') return preview(kind.reaction.emoji);
  return kind && kind.type !== 'text' ? `[${kind.type}]` : '';
}

export interface QueuedSend {
  replyId: string;
  requestEventId: string;
}

/**
 * The one way every domain sends a message: inside the caller's transaction it writes the outbound
 * message, its message request (status queued) and the send job, and emits message.created, in one statement
 * (src/messaging/sql/outbound_queue.sql). The send itself happens later in the pipeline; accepted does not mean
 * delivered.
 */
export class OutboundQueue {
  constructor(private readonly maxAttempts: number) {}

  async queue(tx: Tx, now: Date, input: OutboundInput): Promise<QueuedSend> {
    const message = this.prepare(now, input);
    const { deliveries } = await outboundRepo.queue(tx, message);
    tx.notify(jobsChannel(SEND_TASK));
    if (deliveries > 0) tx.notify(WEBHOOKS_CHANNEL);
    return { replyId: message.message_id, requestEventId: message.request_id };
  }

  /** The rows of one outbound message, with fresh ids, for outbound_queue or a statement that calls it. */
  prepare(now: Date, input: OutboundInput): OutboundMessage {
    const messageId = input.messageId ?? newId('msg');
    const kind = input.kind;
    const requestId = newId('mrq');
    const event = eventRecord(now, input.tenantId, 'message.created', {
      messageId,
      conversationId: input.conversationId,
      direction: 'outbound',
      channel: input.channelKind,
      type: input.template ? 'template' : (kind?.type ?? 'text'),
      requestEventId: requestId,
    });
    return {
      tenant_id: input.tenantId,
      conversation_id: input.conversationId,
      at: now.toISOString(),
      message_id: messageId,
      text: input.text,
      preview: previewOf(input.text, kind),
      request_id: requestId,
      channel_id: input.channelId,
      channel_kind: input.channelKind,
      recipient_phone: input.recipientPhone,
      template_name: input.template?.name ?? null,
      locale: input.template?.locale ?? null,
      provider: null,
      message_type: input.template ? 'template' : (kind?.type ?? 'text'),
      media: kind && 'media' in kind ? kind.media : null,
      reply_to_message_id: kind && 'replyToMessageId' in kind ? (kind.replyToMessageId ?? null) : null,
      reaction: kind?.type === 'reaction' ? kind.reaction : null,
      job_task: SEND_TASK,
      job_payload: { requestEventId: requestId },
      job_max_attempts: this.maxAttempts,
      event_id: event.eventId,
      event_type: 'message.created',
      event_body: event.body,
      event_read_scope: event.readScope,
      event_write_scope: event.writeScope,
    };
  }
}
