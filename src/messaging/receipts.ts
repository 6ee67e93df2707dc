import type { Static } from 'typebox';
import type { Clock } from '../clock.js';
import type { Ctx } from '../context.js';
import type { Db, Queryable } from '../db/driver.js';
import { queueReceipt, RECEIPT_TASK } from './receipt-queue.js';
import type { ClaimedJob, JobContext, JobRunner } from '../jobs/runner.js';
import type { JobWorker } from '../jobs/worker.js';
import type { ChannelRow } from '../channels/repo.js';
import { ChannelSendError, type ChannelConnection } from '../channels/providers/types.js';
import type { ConversationParams } from '../conversations/schema.js';
import { notFound } from '../errors.js';
import { sendThrough, type ProviderRegistry } from './providers/registry.js';
import { refusalError } from './reply.js';
import type { ReplyRefusal } from './outbound-repo.js';

/*
 * Read receipts and typing (decisions 7.2). Marking a conversation read queues the channel's read receipt for the
 * newest inbound message; POST /typing queues the typing indicator (WhatsApp: with that read receipt). Both are a
 * job (src/messaging/receipt-queue.ts), so a provider that fails never fails the call that queued it.
 */

interface TypingRow {
  refusal: ReplyRefusal | null;
  open: boolean;
  hours: number | null;
  last_inbound_at: Date | null;
  closed_at: Date | null;
  channel_kind: ChannelRow['kind'];
}

/** The conversation's send rules and window now, with the same functions as a reply (send_refusal, reply_window). */
async function typingRules(db: Queryable, tenantId: string, conversationId: string, at: Date): Promise<TypingRow | undefined> {
  const rows = await db.query<TypingRow>(
    `SELECT send_refusal(ch.available, COALESCE(ct.opted_out, false), false, NULL) AS refusal, w.open, w.hours, cv.last_inbound_at, w.closed_at, cv.channel_kind
     FROM conversations cv
     JOIN channels ch ON ch.id = cv.channel_id AND ch.tenant_id = cv.tenant_id
     LEFT JOIN contacts ct ON ct.id = cv.contact_id AND ct.tenant_id = cv.tenant_id
     CROSS JOIN LATERAL reply_window(cv.channel_kind, cv.last_inbound_at, cv.window_closed_at, $3) w
     WHERE cv.tenant_id = $1 AND cv.id = $2`,
    [tenantId, conversationId, at],
  );
  return rows[0];
}

export class TypingService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** 202: the typing indicator is queued; refused like a reply (window, opt-out, unavailable channel). */
  async typing({ tenantId }: Ctx, { conversationId }: Static<typeof ConversationParams>) {
    const now = this.clock.now();
    const rules = await typingRules(this.db, tenantId, conversationId, now);
    if (!rules) throw notFound('conversation');
    const refusal = rules.refusal ?? (rules.open ? null : 'outside_customer_service_window');
    if (refusal) {
      throw refusalError({ outcome: 'refused', refusal, windowHours: rules.hours, lastInboundAt: rules.last_inbound_at, windowClosedAt: rules.closed_at }, rules.channel_kind);
    }
    await this.db.transaction((tx) => queueReceipt(tx, now, tenantId, conversationId, true));
    return { conversationId, queued: true as const };
  }
}

export interface ReceiptDeps {
  db: Db;
  providers: ProviderRegistry;
  openConnection: (row: Pick<ChannelRow, 'provider' | 'connection' | 'connection_secret'>) => ChannelConnection | undefined;
}

interface NewestInbound {
  provider_message_id: string | null;
  phone_e164: string | null;
  handle: string | null;
  provider: ChannelRow['provider'];
  connection: ChannelRow['connection'];
  connection_secret: ChannelRow['connection_secret'];
}

/**
 * Sends a queued receipt: the newest inbound message that came through the channel (with the provider's id) is
 * marked read, with the typing indicator when asked. Nothing to mark (no such message): done. A provider failure is
 * retried while it may pass, then logged; it is never the mark-read's failure.
 */
export function registerReceipts(runner: JobRunner, deps: ReceiptDeps): JobWorker {
  const { db } = deps;
  runner.register(RECEIPT_TASK, async (job: ClaimedJob<typeof RECEIPT_TASK>, ctx: JobContext) => {
    const tenantId = job.tenantId ?? '';
    const { conversationId, typing } = job.payload;
    const [row] = await db.query<NewestInbound>(
      `SELECT m.provider_message_id, ct.phone_e164, ct.handle, ch.provider, ch.connection, ch.connection_secret
       FROM conversations cv
       JOIN channels ch ON ch.id = cv.channel_id AND ch.tenant_id = cv.tenant_id
       LEFT JOIN contacts ct ON ct.id = cv.contact_id AND ct.tenant_id = cv.tenant_id
       LEFT JOIN LATERAL (SELECT m.provider_message_id FROM messages m
                          WHERE m.tenant_id = cv.tenant_id AND m.conversation_id = cv.id AND m.direction = 'inbound'
                          ORDER BY m.created_at DESC, m.id DESC LIMIT 1) m ON true
       WHERE cv.tenant_id = $1 AND cv.id = $2`,
      [tenantId, conversationId],
    );
    if (!row?.provider_message_id && !(typing && row && row.provider !== 'whatsapp_cloud')) {
      ctx.log.info({ conversationId }, 'receipt: no inbound message came through the channel; nothing to mark read');
      return;
    }
    const recipient = { ...(row.phone_e164 ? { phone: row.phone_e164 } : {}), ...(row.handle ? { handle: row.handle } : {}) };
    const providerMessageId = row.provider_message_id ?? undefined;
    try {
      const connection = deps.openConnection(row);
      if (!connection) throw new ChannelSendError('channel_not_connected', 'the channel connection is incomplete', { retryable: false });
      const request = typing
        ? { kind: 'typing' as const, ...(providerMessageId ? { providerMessageId } : {}), recipient }
        : { kind: 'read_receipt' as const, providerMessageId: providerMessageId ?? '', typingIndicator: false, recipient };
      await sendThrough(deps.providers, request, connection, ctx.signal);
    } catch (error) {
      const failure = error instanceof ChannelSendError ? error : undefined;
      if ((failure?.retryable ?? true) && job.attempts < job.maxAttempts) throw error;
      ctx.log.warn({ conversationId, typing, code: failure?.code ?? 'send_error' }, 'receipt not sent');
    }
  });
  return {};
}
