import type { Tx } from '../db/driver.js';
import { preview } from '../conversations/inbox.js';
import { newId } from '../ids.js';
import { JOBS_CHANNEL } from '../jobs/queue.js';
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
  /** A WhatsApp template message; omitted for a plain reply inside the conversation. */
  template?: { name: string; locale: string };
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
    tx.notify(JOBS_CHANNEL);
    if (deliveries > 0) tx.notify(WEBHOOKS_CHANNEL);
    return { replyId: message.message_id, requestEventId: message.request_id };
  }

  /** The rows of one outbound message, with fresh ids, for outbound_queue or a statement that calls it. */
  prepare(now: Date, input: OutboundInput): OutboundMessage {
    const messageId = newId('msg');
    const requestId = newId('mrq');
    const event = eventRecord(now, input.tenantId, 'message.created', {
      messageId,
      conversationId: input.conversationId,
      direction: 'outbound',
      channel: input.channelKind,
      type: input.template ? 'template' : 'text',
      requestEventId: requestId,
    });
    return {
      tenant_id: input.tenantId,
      conversation_id: input.conversationId,
      at: now.toISOString(),
      message_id: messageId,
      text: input.text,
      preview: preview(input.text),
      request_id: requestId,
      channel_id: input.channelId,
      channel_kind: input.channelKind,
      recipient_phone: input.recipientPhone,
      template_name: input.template?.name ?? null,
      locale: input.template?.locale ?? null,
      provider: null,
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
