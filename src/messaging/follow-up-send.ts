import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { FollowUpParams, SendBody } from '../crm/schema.js';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { channelRepo } from '../channels/repo.js';
import { conversationRepo } from '../conversations/repo.js';
import { conflict, invalid } from '../errors.js';
import { runIdempotent, type IdempotencyKeyUse } from '../platform/idempotency.js';
import type { OutboundQueue } from './outbound.js';
import { sendRefusal } from './send-rules.js';
import { crmRepo, type FollowUpRow } from '../crm/repo.js';
import { emitOpportunityUpdated, requireFollowUp } from '../crm/service.js';
import { followUpView, generatedDraft } from '../crm/views.js';

export interface SendOutcome {
  followUp: ReturnType<typeof followUpView>;
  reply: { replyId: string; requestEventId: string; conversationId: string; status: 'queued' };
  crmStatusUpdateFailed?: true;
}

/**
 * Sending a follow-up, manually or by automation, always through one claim:
 * 1. in one transaction the claim is taken (`claim_state` null → completed) and the message is queued
 *    through the outbound pipeline; a concurrent send waits on the row lock, then sees the claim and
 *    gets 409, creating nothing;
 * 2. then the CRM record is completed (status sent, opportunity touched). If that step fails the send
 *    still stands: the response says `crmStatusUpdateFailed: true`, the claim stays completed so it is
 *    never sent again, and automation finishes the record later.
 */
export class FollowUpSender {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly outbound: OutboundQueue,
    private readonly log: Logger,
  ) {}

  /** The public send: once per follow-up, under the caller's Idempotency-Key when given. */
  async send(ctx: Ctx, { followUpId, ...input }: Static<typeof FollowUpParams> & Static<typeof SendBody> & { idempotency?: IdempotencyKeyUse }) {
    return this.sendAs(ctx.tenantId, followUpId, input);
  }

  /** Sends for the API (above) or for automation (`requireConsent`: automation never contacts without consent). */
  async sendAs(
    tenantId: string,
    followUpId: string,
    input: { messageText?: string; idempotency?: IdempotencyKeyUse; requireConsent?: boolean },
  ): Promise<{ body: SendOutcome; replayed: boolean }> {
    const accept = (tx: Tx) => this.claimAndQueue(tx, tenantId, followUpId, input.messageText, input.requireConsent ?? false);
    let accepted: { body: SendOutcome; replayed: boolean };
    if (input.idempotency) {
      const result = await runIdempotent(this.db, this.clock, { tenantId, ...input.idempotency, request: { followUpId, messageText: input.messageText ?? null } }, async (tx) => ({
        status: 202,
        body: await accept(tx),
      }));
      // The stored body is the acceptance (status sending); finish it the same way, so a replay answers
      // what the first request answered (the completed record, or crmStatusUpdateFailed if still failing).
      if (result.replayed) return { body: await this.complete(tenantId, followUpId, result.body), replayed: true };
      accepted = { body: result.body, replayed: false };
    } else {
      accepted = { body: await this.db.transaction(accept), replayed: false };
    }
    return { body: await this.complete(tenantId, followUpId, accepted.body), replayed: false };
  }

  private async claimAndQueue(tx: Tx, tenantId: string, followUpId: string, messageText: string | undefined, requireConsent: boolean): Promise<SendOutcome> {
    const row = await requireFollowUp(tx, tenantId, followUpId, true);
    if (row.claim_state) throw conflict(`this follow-up already has a ${row.claim_state} send claim; do not send again`, { claim: row.claim_state, status: row.status });
    if (row.status !== 'pending' && row.status !== 'scheduled') throw conflict(`a ${row.status} follow-up cannot be sent`, { status: row.status });
    const now = this.clock.now();
    if (row.expires_at.getTime() <= now.getTime()) throw conflict('this follow-up has expired', { status: 'expired' });
    const conversation = await conversationRepo.get(tx, tenantId, row.conversation_id);
    if (!conversation) throw conflict('the follow-up conversation no longer exists');
    const channel = await channelRepo.get(tx, tenantId, conversation.channel_id);
    const contact = await conversationRepo.getContact(tx, tenantId, conversation.contact_id);
    const refusal = await sendRefusal(tx, { channelAvailable: channel?.available ?? false, optedOut: contact?.opted_out ?? false, consentRequired: requireConsent, consent: contact?.consent ?? false });
    if (refusal === 'channel_unavailable' || !channel) throw conflict('the conversation channel is not available for sending', { reason: 'channel_unavailable' });
    if (refusal === 'recipient_opted_out') throw conflict('the contact has opted out', { reason: 'recipient_opted_out' });
    if (refusal === 'recipient_no_consent') throw conflict('the contact has not given consent to be contacted', { reason: 'recipient_no_consent' });
    const text = messageText ?? row.message_draft ?? generatedDraft(row, contact?.name ?? null);
    if (!text.trim()) throw invalid('body.messageText', 'there is no message to send');
    const queued = await this.outbound.queue(tx, now, {
      tenantId,
      conversationId: conversation.id,
      channelId: channel.id,
      channelKind: channel.kind,
      recipientPhone: contact?.phone_e164 ?? null,
      text,
    });
    const claimed = await crmRepo.updateFollowUp(
      tx,
      row.tenant_id,
      row.id,
      { status: 'sending', claim_state: 'completed', claimed_at: now, reply_id: queued.replyId, request_event_id: queued.requestEventId, message_draft: text },
      now,
    );
    return { followUp: followUpView(claimed), reply: { ...queued, conversationId: conversation.id, status: 'queued' } };
  }

  /** The CRM completion step (also used by automation to finish records whose completion failed). */
  async complete(tenantId: string, followUpId: string, accepted: SendOutcome): Promise<SendOutcome> {
    try {
      const row = await this.db.transaction((tx) => this.completeIn(tx, tenantId, followUpId));
      return { ...accepted, followUp: followUpView(row) };
    } catch (error) {
      this.log.error({ err: error, tenantId, followUpId }, 'follow-up sent but the CRM record could not be updated; it will be reconciled');
      return { ...accepted, crmStatusUpdateFailed: true };
    }
  }

  async completeIn(tx: Tx, tenantId: string, followUpId: string): Promise<FollowUpRow> {
    const now = this.clock.now();
    const row = await requireFollowUp(tx, tenantId, followUpId, true);
    if (row.status !== 'sending') return row;
    const sent = await crmRepo.updateFollowUp(tx, tenantId, row.id, { status: 'sent', sent_at: now }, now);
    if (row.opportunity_id) {
      const opportunity = await crmRepo.updateOpportunity(tx, tenantId, row.opportunity_id, { followUpAt: now }, now);
      if (opportunity) await emitOpportunityUpdated(tx, now, opportunity, ['lastFollowUpAt']);
    }
    return sent;
  }
}
