import type { Queryable } from '../db/driver.js';
import type { StoredUse } from '../platform/idempotency-repo.js';
import type { PayloadOf } from '../jobs/tasks.js';
import type { SendRefusal } from './send-rules.js';

/** Every row of one outbound message: the fields of the SQL type outbound_message (migration 0021; src/messaging/sql/outbound_queue.sql). */
export interface OutboundMessage {
  tenant_id: string;
  conversation_id: string;
  at: string;
  message_id: string;
  text: string;
  preview: string;
  request_id: string;
  channel_id: string;
  channel_kind: string;
  recipient_phone: string | null;
  template_name: string | null;
  locale: string | null;
  /** Left null: outbound_queue and conversation_replies read the channel's provider (decisions 7.1). */
  provider: string | null;
  /** The message's type (decisions 7.2); media, the message answered and a reaction, when it has them. */
  message_type: string;
  media: { contentType: string; sizeBytes: number; filename: string; status: 'ready' } | null;
  reply_to_message_id: string | null;
  reaction: { emoji: string; targetMessageId: string } | null;
  job_task: 'messaging.send';
  job_payload: PayloadOf<'messaging.send'>;
  job_max_attempts: number;
  event_id: string;
  event_type: string;
  event_body: string;
  event_read_scope: string;
  event_write_scope: string;
}

/** One reply of conversation_replies (src/messaging/sql/conversation_replies.sql): its message and its Idempotency-Key's use. */
export interface ReplyClaim {
  message: OutboundMessage;
  operation: string;
  key: string;
  requestHash: string;
  /** The 202 body stored with the key. */
  response: unknown;
  expiresAt: Date;
}

/** pg_notify channel names that wake the send workers and the webhook dispatchers. */
export interface WakeChannels {
  jobs: string;
  webhooks: string;
}

export type ReplyOutcome =
  | { outcome: 'queued'; deliveries: number }
  | { outcome: 'taken'; stored: StoredUse }
  | { outcome: 'missing' }
  | { outcome: 'refused'; refusal: ReplyRefusal; windowHours: number | null; lastInboundAt: Date | null; windowClosedAt: Date | null };

/** Why conversation_replies refused a reply: a send rule (send_refusal) or the customer-service window (reply_window). */
export type ReplyRefusal = SendRefusal | 'outside_customer_service_window';

interface ReplyRow {
  ordinal: number;
  outcome: ReplyOutcome['outcome'];
  stored_hash: string | null;
  stored_status: number | null;
  /** JSON text. */
  stored_body: string | null;
  refusal: ReplyRefusal | null;
  window_hours: number | null;
  last_inbound: Date | null;
  window_closed_at: Date | null;
  deliveries: number | null;
}

export const outboundRepo = {
  /** Writes the message and what comes with it (outbound_queue); how many webhook deliveries its event fanned out to. */
  async queue(db: Queryable, message: OutboundMessage): Promise<{ deliveries: number }> {
    const rows = await db.query<{ deliveries: number }>('SELECT deliveries FROM outbound_queue($1::jsonb)', [JSON.stringify(message)]);
    return rows[0];
  },

  /** Replies in one statement committed on its own (conversation_replies): one outcome per claim, in their order. */
  async replies(db: Queryable, claims: readonly ReplyClaim[], wake: WakeChannels): Promise<ReplyOutcome[]> {
    const rows = await db.query<ReplyRow>(`SELECT ordinal, outcome, stored_hash, stored_status, stored_body::text AS stored_body, refusal, window_hours, last_inbound, window_closed_at, deliveries
       FROM conversation_replies($1::jsonb, $2, $3)`, [JSON.stringify(claims), wake.jobs, wake.webhooks]);
    return rows.sort((a, b) => a.ordinal - b.ordinal).map(toOutcome);
  },
};

function toOutcome(row: ReplyRow): ReplyOutcome {
  switch (row.outcome) {
    case 'queued':
      return { outcome: 'queued', deliveries: row.deliveries ?? 0 };
    case 'taken':
      return { outcome: 'taken', stored: { request_hash: row.stored_hash ?? '', response_status: row.stored_status ?? 202, response_body: row.stored_body ?? 'null' } };
    case 'missing':
      return { outcome: 'missing' };
    case 'refused':
      return {
        outcome: 'refused',
        refusal: row.refusal ?? 'channel_unavailable',
        windowHours: row.window_hours,
        lastInboundAt: row.last_inbound,
        windowClosedAt: row.window_closed_at,
      };
  }
}
