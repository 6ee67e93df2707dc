import type { Clock } from '../clock.js';
import type { Db, Queryable } from '../db/driver.js';
import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import { channelRepo } from '../channels/repo.js';
import { startReadinessView } from '../channels/service.js';
import { ensureContact, ensureConversation } from '../conversations/inbox.js';
import { normalizePhone } from '../conversations/phone.js';
import { conversationRepo } from '../conversations/repo.js';
import { DomainError, conflict, invalid, notFound } from '../errors.js';
import { runIdempotent, type IdempotencyKeyUse } from '../platform/idempotency.js';
import { messageRequestRepo, type RequestStatus } from './repo.js';
import { sendRefusal } from './send-rules.js';
import { moveStatus, requestStatusView } from './status.js';
import type { OutboundQueue } from './outbound.js';
import type { RequestParams, StartAccepted, StartBody, TemplateStatusQuery } from './schema.js';


type StartInput = Static<typeof StartBody>;
type RequestRef = Static<typeof RequestParams>;

type StartResult = Static<typeof StartAccepted>;

/** Conversation start, message request status and the simulated provider callbacks. */
export class MessagingService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly outbound: OutboundQueue,
  ) {}

  private async whatsappChannel(db: Queryable, tenantId: string, channelId: string, path: string) {
    const channel = await channelRepo.get(db, tenantId, channelId);
    if (!channel) throw notFound('channel');
    if (channel.kind !== 'whatsapp') throw new DomainError('M2M_INVALID_REQUEST', 'the channel is not a WhatsApp channel', { reason: 'channel_not_whatsapp', issues: [{ path, message: 'is not a WhatsApp channel' }] });
    return channel;
  }

  /** Persisted per-locale readiness of the channel's conversation-start template; never refreshed here. */
  async templateStatus({ tenantId }: Ctx, { channelId }: Static<typeof TemplateStatusQuery>) {
    await this.whatsappChannel(this.db, tenantId, channelId, 'query.channelId');
    return startReadinessView(channelId, await channelRepo.latestTemplate(this.db, tenantId, channelId));
  }

  /**
   * Checks every precondition, then writes contact, conversation, outbound message, message request,
   * send job and events in one transaction. Replays the stored 202 for a repeated Idempotency-Key.
   */
  async start(ctx: Ctx, { idempotency, ...input }: StartInput & { idempotency: IdempotencyKeyUse }) {
    // The schema checks the E.164 shape; this checks that the number exists (and names the right field).
    if (!normalizePhone(input.recipientPhone)) throw invalid('body.recipientPhone', 'must be a valid phone number in E.164 form, such as +525512345678');
    return runIdempotent<StartResult>(this.db, this.clock, { tenantId: ctx.tenantId, ...idempotency, request: input }, async (tx) => {
      const tenantId = ctx.tenantId;
      const channel = await this.whatsappChannel(tx, tenantId, input.channelId, 'body.channelId');
      if ((await sendRefusal(tx, { channelAvailable: channel.available })) === 'channel_unavailable') throw new DomainError('M2M_INVALID_REQUEST', 'the WhatsApp channel is not available for sending', { reason: 'channel_unavailable', issues: [{ path: 'body.channelId', message: 'is not available' }] });
      const template = await channelRepo.latestTemplate(tx, tenantId, channel.id);
      const locale = template?.locales.find((entry) => entry.locale === input.locale);
      if (!template || !locale || !locale.ready) {
        throw new DomainError('M2M_INVALID_REQUEST', `the conversation-start template is not prepared for locale ${input.locale} (status ${locale?.status ?? 'not_prepared'}); finish its setup in the dashboard`, {
          reason: 'template_not_prepared',
          locale: input.locale,
          status: locale?.status ?? 'not_prepared',
          issues: [{ path: 'body.locale', message: `template not prepared for ${input.locale}` }],
        });
      }
      const now = this.clock.now();
      let contact = await ensureContact(tx, tenantId, { phone: input.recipientPhone }, now);
      const refusal = await sendRefusal(tx, { optedOut: contact.opted_out, consentRequired: true, consent: contact.consent });
      if (refusal === 'recipient_opted_out') throw conflict('the recipient has opted out', { reason: 'recipient_opted_out' });
      if (refusal === 'recipient_no_consent') throw conflict('the recipient has not given consent to be contacted', { reason: 'recipient_no_consent' });
      const failed = await messageRequestRepo.hasUnreconciledFailure(tx, tenantId, contact.phone_e164!);
      if (failed) {
        throw conflict('a previous send to this recipient failed; reconcile it before sending again', { reason: 'unreconciled_failed_attempt', requestEventId: failed });
      }
      if (input.contactName && !contact.name) {
        contact = (await conversationRepo.updateContact(tx, tenantId, contact.id, { name: input.contactName }, now)) ?? contact;
      }
      const conversation = await ensureConversation(tx, tenantId, channel, contact, now);
      const { replyId, requestEventId } = await this.outbound.queue(tx, now, {
        tenantId,
        conversationId: conversation.id,
        channelId: channel.id,
        channelKind: channel.kind,
        recipientPhone: contact.phone_e164,
        text: input.messageText,
        template: { name: template.template_name, locale: input.locale },
      });
      return { status: 202, body: { conversationId: conversation.id, replyId, requestEventId } };
    });
  }

  async requestStatus({ tenantId }: Ctx, { requestEventId }: RequestRef) {
    const row = await messageRequestRepo.get(this.db, tenantId, requestEventId);
    if (!row) throw notFound('message request');
    return requestStatusView(row);
  }

  /** Acknowledges a failed send so that new sends to the recipient are allowed again. */
  async reconcile({ tenantId }: Ctx, { requestEventId }: RequestRef) {
    const row = await messageRequestRepo.reconcile(this.db, tenantId, requestEventId, this.clock.now());
    if (row) return { ...requestStatusView(row), reconciled: true };
    const existing = await messageRequestRepo.get(this.db, tenantId, requestEventId);
    if (!existing) throw notFound('message request');
    throw conflict(`only a failed send can be reconciled; this one is ${existing.status}`, { status: existing.status });
  }

  /** A provider callback (the admin route simulates it for the sandbox provider). */
  async applyProviderStatus(tenantId: string, requestEventId: string, status: Exclude<RequestStatus, 'queued'>, error?: { code: string; message: string }) {
    if (status !== 'failed' && error) throw invalid('body.error', 'only a failed status carries an error');
    return this.db.transaction(async (tx) => {
      const row = await messageRequestRepo.get(tx, tenantId, requestEventId, true);
      if (!row) throw notFound('message request');
      const failure = status === 'failed' ? (error ?? { code: 'provider_failed', message: 'the provider reported a failure' }) : null;
      return requestStatusView(await moveStatus(tx, this.clock.now(), row, status, failure));
    });
  }
}
