import type { Tx } from '../db/driver.js';
import { iso } from '../util/time.js';
import { emit } from '../webhooks/events.js';
import { messageRequestRepo, type MessageRequestRow, type RequestStatus } from './repo.js';

/**
 * Applies a status change, if it is a move (message_status_moves, src/messaging/sql/message_status_moves.sql,
 * decides: only forward, failed from any state but read), and emits message.delivery.updated in the same
 * transaction. Returns the row as it now is: unchanged when it was no move.
 */
export async function moveStatus(
  tx: Tx,
  now: Date,
  row: MessageRequestRow,
  to: Exclude<RequestStatus, 'queued'>,
  error: { code: string; message: string } | null = null,
  /** When it happened at the provider (a read receipt's time); now when not known. */
  at: Date = now,
): Promise<MessageRequestRow> {
  const updated = await messageRequestRepo.setStatus(tx, row.tenant_id, row.id, to, error, now);
  if (!updated) return row;
  if (to === 'read') await messageRequestRepo.markMessageRead(tx, row.tenant_id, row.reply_id, at);
  await emit(tx, now, row.tenant_id, 'message.delivery.updated', {
    requestEventId: row.id,
    status: to,
    replyId: row.reply_id,
    conversationId: row.conversation_id,
    ...(updated.provider_message_id ? { providerMessageId: updated.provider_message_id } : {}),
    ...(to === 'failed' && updated.error_code ? { errorCode: updated.error_code } : {}),
  });
  return updated;
}

/** The message request status record (decisions.md section 4). */
export function requestStatusView(row: MessageRequestRow) {
  return {
    requestEventId: row.id,
    status: row.status,
    conversationId: row.conversation_id,
    replyId: row.reply_id,
    channel: row.channel_kind,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
    ...(row.status === 'failed' && row.error_code ? { error: { code: row.error_code, message: row.error_message ?? row.error_code } } : {}),
  };
}
