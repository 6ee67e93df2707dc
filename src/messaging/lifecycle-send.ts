import type { Tx } from '../db/driver.js';
import { channelRepo, type ChannelRow } from '../channels/repo.js';
import { ensureContact, ensureConversation } from '../conversations/inbox.js';
import { conversationRepo } from '../conversations/repo.js';
import type { OutboundQueue } from './outbound.js';
import { messageRequestRepo } from './repo.js';
import { sendRefusal } from './send-rules.js';

/** Why a lifecycle message is not sent to a guest (src/reservations/lifecycle.ts records it as the attempt's reason). */
export type LifecycleSkip = 'contact_opted_out' | 'contact_without_consent' | 'unreconciled_failed_send';

export type LifecycleSend = { skipped: LifecycleSkip } | { conversationId: string; requestEventId: string; withTemplate: boolean };

/**
 * A reservation lifecycle message to a guest's phone, in the caller's transaction: only to a known contact who
 * gave consent and has not opted out (send_refusal), never while an earlier failed send to the phone is not
 * reconciled; then the contact's conversation on the sender channel and the message, as the channel's
 * conversation-start template when it is ready in en_US, else as plain text.
 */
export async function sendLifecycleMessage(
  tx: Tx,
  outbound: OutboundQueue,
  now: Date,
  { tenantId, sender, phone, text }: { tenantId: string; sender: ChannelRow; phone: string; text: string },
): Promise<LifecycleSend> {
  const known = await conversationRepo.findContactByPhone(tx, tenantId, phone);
  const refusal = await sendRefusal(tx, { optedOut: known?.opted_out ?? false, consentRequired: true, consent: known?.consent ?? false });
  if (refusal === 'recipient_opted_out') return { skipped: 'contact_opted_out' };
  if (refusal === 'recipient_no_consent') return { skipped: 'contact_without_consent' };
  if (await messageRequestRepo.hasUnreconciledFailure(tx, tenantId, phone)) return { skipped: 'unreconciled_failed_send' };

  const contact = await ensureContact(tx, tenantId, { phone }, now);
  const conversation = await ensureConversation(tx, tenantId, sender, contact, now);
  const template = await channelRepo.latestTemplate(tx, tenantId, sender.id);
  const ready = template?.locales.some((entry) => entry.locale === 'en_US' && entry.ready) ?? false;
  const queued = await outbound.queue(tx, now, {
    tenantId,
    conversationId: conversation.id,
    channelId: sender.id,
    channelKind: sender.kind,
    recipientPhone: phone,
    text,
    ...(ready && template ? { template: { name: template.template_name, locale: 'en_US' } } : {}),
  });
  return { conversationId: conversation.id, requestEventId: queued.requestEventId, withTemplate: ready };
}
