import type { Logger } from 'pino';
import type { Tx } from '../db/driver.js';
import { DomainError } from '../errors.js';
import { writeExternalOutbound, type InboundInput } from '../conversations/inbox.js';
import { conversationRepo } from '../conversations/repo.js';
import { messageRequestRepo } from '../messaging/repo.js';
import { moveStatuses } from '../messaging/status.js';
import { closeWindow } from '../messaging/window.js';
import { queueMediaDownload } from './media-download.js';
import { channelRepo, type ChannelRow } from './repo.js';
import type { DeliveryStatusEvent, InboundEvent, InboundMessageEvent, WatermarkEvent } from './providers/types.js';

/**
 * A Messenger/Instagram echo of a send whose provider call is still under way is not stored yet: the send records
 * its provider id right after the call, and the callback job retries (with backoff) until it has. A call started
 * longer ago than this is taken as lost (its echo is then stored as `external`).
 */
const ECHO_WAIT_MS = 120_000;

/** An event that must wait for other work to commit: the callback job fails this attempt and retries later. */
export class CallbackNotReady extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CallbackNotReady';
  }
}

export type Outcome = 'applied' | 'duplicate' | 'skipped';

/** A guest's message (not an echo): written in groups by src/conversations/inbound-batch.ts. */
export function isGuestMessage(event: InboundEvent): event is InboundMessageEvent {
  return event.kind === 'message' && !event.echo;
}

/** A delivery status: applied in groups (applyStatuses); the other events one at a time (applyAlone). */
export function isDeliveryStatus(event: InboundEvent): event is DeliveryStatusEvent {
  return event.kind === 'status';
}

/**
 * One event other than a guest's message, under a savepoint: an event our rules refuse (a DomainError, such as a
 * sender without a usable address) is logged and skipped, so one odd item never holds back the rest of the
 * callback; any other error fails the batch and the job retries it.
 */
export async function applyAlone(tx: Tx, event: InboundEvent, channel: ChannelRow, now: Date, log: Logger): Promise<Outcome> {
  await tx.query('SAVEPOINT callback_event');
  try {
    const outcome = await apply(tx, event, channel, now);
    await tx.query('RELEASE SAVEPOINT callback_event');
    return outcome;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    await tx.query('ROLLBACK TO SAVEPOINT callback_event');
    log.warn({ channelId: channel.id, kind: event.kind, reason: error.message }, 'callback event refused; skipped');
    return 'skipped';
  }
}

async function apply(tx: Tx, event: InboundEvent, channel: ChannelRow, now: Date): Promise<Outcome> {
  switch (event.kind) {
    case 'message':
      // Guests' messages are written in groups (callbacks.ts); only echoes come here.
      return event.echo ? applyEcho(tx, event, event.echo.recipient.handle, channel, now) : 'skipped';
    case 'status':
      return (await applyStatuses(tx, [{ event, channel }], now))[0];
    case 'channel_error':
      await channelRepo.noteError(tx, channel.tenant_id, channel.id, event.error, false, now);
      return 'applied';
    case 'watermark':
      return applyWatermark(tx, event, channel, now);
  }
}

/**
 * A Messenger/Instagram echo: the business's own message. One this service sent (its provider id is on one of our
 * sends) writes nothing; one from another tool is stored as an outbound message with `source: external` on the
 * guest's conversation (decisions 7.1). A send of the conversation still in its provider call may be this echo's: the event waits.
 */
async function applyEcho(tx: Tx, event: InboundMessageEvent, guest: string | undefined, channel: ChannelRow, now: Date): Promise<Outcome> {
  if (!guest) return 'skipped';
  const ours = await messageRequestRepo.getByProviderId(tx, channel.provider, event.providerMessageId);
  if (ours && ours.channel_id === channel.id) return 'duplicate';
  const contact = await conversationRepo.findContactByHandle(tx, channel.tenant_id, guest);
  const conversation = contact ? await conversationRepo.findConversation(tx, channel.tenant_id, channel.id, contact.id) : undefined;
  if (conversation && (await messageRequestRepo.dispatchInFlight(tx, channel.tenant_id, conversation.id, now, ECHO_WAIT_MS))) {
    throw new CallbackNotReady(`an echo on conversation ${conversation.id} waits for a send under way to record its provider id`);
  }
  const input = await inboundInput(tx, { ...event, sender: { handle: guest } }, channel, now);
  const written = await writeExternalOutbound(tx, channel, input, now);
  if (!written) return 'duplicate';
  if (event.media) await queueMediaDownload(tx, now, channel.tenant_id, written.messageId);
  return 'applied';
}

/**
 * Messenger `delivery`/`read` and Instagram `messaging_seen`: every send of the guest's conversation the receipt
 * reaches moves forward (only forward, message_status_moves) and emits message.delivery.updated; a read sets
 * readAt. Meta's watermark covers every message sent at or before it, which our sends' creation time stands for;
 * Instagram names the message seen instead, which covers it and every earlier one.
 */
async function applyWatermark(tx: Tx, event: WatermarkEvent, channel: ChannelRow, now: Date): Promise<Outcome> {
  const handle = event.contact.handle;
  if (!handle) return 'skipped';
  const contact = await conversationRepo.findContactByHandle(tx, channel.tenant_id, handle);
  const conversation = contact ? await conversationRepo.findConversation(tx, channel.tenant_id, channel.id, contact.id) : undefined;
  if (!conversation) return 'skipped';
  let watermark = event.watermark ?? null;
  if (!watermark) {
    // Instagram: the newest named message stands for the watermark.
    for (const id of event.providerMessageIds) {
      const row = await messageRequestRepo.getByProviderId(tx, channel.provider, id);
      if (row && row.channel_id === channel.id && (!watermark || row.created_at > watermark)) watermark = row.created_at;
    }
  }
  const reached = await messageRequestRepo.reachedByWatermark(tx, channel.tenant_id, conversation.id, event.status, watermark, event.providerMessageIds);
  const happened = event.timestamp ?? event.watermark ?? now;
  const at = happened.getTime() > now.getTime() ? now : happened;
  const rows = reached.reverse();
  const after = await moveStatuses(tx, now, rows.map((row) => ({ row, to: event.status, at })));
  const moved = after.filter((row, index) => row !== rows[index]).length;
  return moved > 0 ? 'applied' : 'duplicate';
}

/**
 * WhatsApp delivery statuses, a group at once: each names one of our sends by its provider id, which moves forward
 * (only forward, message_status_moves) and emits message.delivery.updated; a failure that closes the customer-service
 * window closes it. A status for no send of its channel is skipped. One outcome per status, in order.
 */
export async function applyStatuses(tx: Tx, statuses: ReadonlyArray<{ event: DeliveryStatusEvent; channel: ChannelRow }>, now: Date): Promise<Outcome[]> {
  const key = (provider: string, providerMessageId: string) => `${provider} ${providerMessageId}`;
  const stored = await messageRequestRepo.getManyByProviderIds(tx, statuses.map(({ event, channel }) => ({ provider: channel.provider, providerMessageId: event.providerMessageId })));
  const byId = new Map(stored.map((row) => [key(row.provider, row.provider_message_id ?? ''), row]));
  const named = statuses.map(({ event, channel }) => {
    const row = byId.get(key(channel.provider, event.providerMessageId));
    return row && row.channel_id === channel.id ? row : undefined;
  });
  const moves = statuses.flatMap(({ event }, index) => {
    const row = named[index];
    return row ? [{ row, to: event.status, error: event.error ?? null, at: event.timestamp }] : [];
  });
  const after = await moveStatuses(tx, now, moves);
  const outcomes: Outcome[] = [];
  let next = 0;
  for (const [index, { event }] of statuses.entries()) {
    const row = named[index];
    if (!row) {
      outcomes.push('skipped');
      continue;
    }
    outcomes.push(after[next++] === row ? 'duplicate' : 'applied');
    if (event.closesWindow) await closeWindow(tx, row.tenant_id, row.conversation_id, event.timestamp);
  }
  return outcomes;
}

/** The neutral message as the inbox stores it, before the provider ids it refers to are looked up. */
export function messageInput(event: InboundMessageEvent, now: Date): InboundInput {
  return {
    contact: { ...(event.sender.phone ? { phone: event.sender.phone, phoneFromProvider: true } : {}), ...(event.sender.handle ? { handle: event.sender.handle } : {}), ...(event.sender.profileName ? { name: event.sender.profileName } : {}) },
    text: event.text ?? '',
    // The provider's time, never later than ours (a skewed clock must not open a window into the future).
    at: event.timestamp.getTime() > now.getTime() ? now : event.timestamp,
    type: event.type,
    source: 'channel',
    providerMessageId: event.providerMessageId,
    ...(event.media
      ? {
          media: {
            contentType: event.media.contentType ?? 'application/octet-stream',
            ...(event.media.filename ? { filename: event.media.filename } : {}),
            status: 'pending' as const,
            ...(event.media.providerMediaId ? { providerMediaId: event.media.providerMediaId } : {}),
            ...(event.media.url ? { url: event.media.url } : {}),
          },
        }
      : {}),
    ...(event.location ? { location: event.location } : {}),
    ...(event.interactive ? { interactive: event.interactive } : {}),
    ...(event.reaction ? { reaction: { emoji: event.reaction.emoji, targetProviderMessageId: event.reaction.targetProviderMessageId } } : {}),
    ...(event.contacts ? { contacts: event.contacts } : {}),
  };
}

/** messageInput with the provider ids it refers to as our message ids. */
async function inboundInput(tx: Tx, event: InboundMessageEvent, channel: ChannelRow, now: Date): Promise<InboundInput> {
  const ours = (providerId: string | undefined) => (providerId ? conversationRepo.messageIdByProviderId(tx, channel.tenant_id, channel.id, providerId) : Promise.resolve(undefined));
  const input = messageInput(event, now);
  const replyToMessageId = await ours(event.replyToProviderMessageId);
  const targetMessageId = input.reaction ? await ours(input.reaction.targetProviderMessageId) : undefined;
  return {
    ...input,
    ...(input.reaction && targetMessageId ? { reaction: { ...input.reaction, targetMessageId } } : {}),
    ...(replyToMessageId ? { replyToMessageId } : {}),
  };
}
