import type { Tx } from '../db/driver.js';
import { iso } from '../util/time.js';
import { WEBHOOKS_CHANNEL, eventRecord } from '../webhooks/events.js';
import { messageRequestRepo, type MessageRequestRow, type RequestStatus } from './repo.js';

/** A status change asked of a message request, as read before it (a callback, a watermark, a failure, the admin API). */
export interface StatusMove {
  row: MessageRequestRow;
  to: Exclude<RequestStatus, 'queued'>;
  error?: { code: string; message: string } | null;
  /** When it happened at the provider (a read receipt's time); now when not known. */
  at?: Date;
}

/**
 * Applies status changes that are moves (message_status_apply, src/messaging/sql/message_status_apply.sql: only
 * forward, failed from any state but read, per message_status_moves), each emitting message.delivery.updated in the
 * same transaction, all in one statement. Returns each request as it now is: the row given when it was no move.
 */
export async function moveStatuses(tx: Tx, now: Date, moves: readonly StatusMove[]): Promise<MessageRequestRow[]> {
  if (moves.length === 0) return [];
  const prepared = moves.map(({ row, to, error, at }) => {
    // The error the move records: the one given, or the one the request had.
    const errorCode = error?.code ?? row.error_code;
    const event = eventRecord(now, row.tenant_id, 'message.delivery.updated', {
      requestEventId: row.id,
      status: to,
      replyId: row.reply_id,
      conversationId: row.conversation_id,
      ...(row.provider_message_id ? { providerMessageId: row.provider_message_id } : {}),
      ...(to === 'failed' && errorCode ? { errorCode } : {}),
    });
    return {
      tenantId: row.tenant_id,
      requestId: row.id,
      status: to,
      errorCode: error?.code ?? null,
      errorMessage: error?.message ?? null,
      at: (at ?? now).toISOString(),
      eventId: event.eventId,
      eventBody: event.body,
      eventReadScope: event.readScope,
      eventWriteScope: event.writeScope,
    };
  });
  const outcomes = await messageRequestRepo.applyStatusMoves(tx, prepared, now);
  if (outcomes.some((outcome) => outcome.deliveries > 0)) tx.notify(WEBHOOKS_CHANNEL);
  return moves.map(({ row, to }, index) => {
    const outcome = outcomes[index];
    return outcome.moved ? { ...row, status: to, error_code: outcome.errorCode, error_message: outcome.errorMessage, updated_at: now } : row;
  });
}

/** One status change (moveStatuses); the row as it now is, unchanged when it was no move. */
export async function moveStatus(
  tx: Tx,
  now: Date,
  row: MessageRequestRow,
  to: Exclude<RequestStatus, 'queued'>,
  error: { code: string; message: string } | null = null,
  at: Date = now,
): Promise<MessageRequestRow> {
  const [moved] = await moveStatuses(tx, now, [{ row, to, error, at }]);
  return moved;
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
