import type { Tx } from '../db/driver.js';
import { preview } from '../conversations/inbox.js';
import { conversationRepo } from '../conversations/repo.js';
import { newId } from '../ids.js';
import { enqueue } from '../jobs/queue.js';
import { emit } from '../webhooks/events.js';
import { messageRequestRepo } from './repo.js';
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
 * message, its message request (status queued) and the send job, and emits message.created. The send
 * itself happens later in the pipeline; accepted does not mean delivered.
 */
export class OutboundQueue {
  constructor(
    private readonly providerName: string,
    private readonly maxAttempts: number,
  ) {}

  async queue(tx: Tx, now: Date, input: OutboundInput): Promise<QueuedSend> {
    const replyId = newId('msg');
    const requestEventId = newId('mrq');
    await conversationRepo.insertMessage(tx, { id: replyId, tenantId: input.tenantId, conversationId: input.conversationId, direction: 'outbound', text: input.text, requestEventId, now });
    await conversationRepo.recordOutbound(tx, input.tenantId, input.conversationId, { preview: preview(input.text), now });
    await messageRequestRepo.insert(tx, {
      id: requestEventId,
      tenant_id: input.tenantId,
      conversation_id: input.conversationId,
      reply_id: replyId,
      channel_id: input.channelId,
      channel_kind: input.channelKind,
      recipient_phone: input.recipientPhone,
      template_name: input.template?.name ?? null,
      locale: input.template?.locale ?? null,
      text: input.text,
      provider: this.providerName,
      now,
    });
    await enqueue(tx, now, { task: SEND_TASK, tenantId: input.tenantId, payload: { requestEventId }, dedupeKey: requestEventId, maxAttempts: this.maxAttempts });
    await emit(tx, now, input.tenantId, 'message.created', {
      messageId: replyId,
      conversationId: input.conversationId,
      direction: 'outbound',
      channel: input.channelKind,
      requestEventId,
    });
    return { replyId, requestEventId };
  }
}
