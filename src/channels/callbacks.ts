import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Db, Tx } from '../db/driver.js';
import { DomainError } from '../errors.js';
import type { ClaimedJob, JobContext, JobRunner } from '../jobs/runner.js';
import type { JobWorker } from '../jobs/worker.js';
import { noWorkCounters, type WorkCounters } from '../metrics/counters.js';
import { writeExternalOutbound, writeInbound, type InboundInput } from '../conversations/inbox.js';
import { conversationRepo } from '../conversations/repo.js';
import { messageRequestRepo } from '../messaging/repo.js';
import { moveStatus } from '../messaging/status.js';
import { closeWindow } from '../messaging/window.js';
import { CALLBACK_TASK, callbackRepo } from './callback-repo.js';
import { queueMediaDownload } from './media-download.js';
import { queueContactProfile } from './contact-profile.js';
import { channelRepo, type ChannelRow } from './repo.js';
import { parseMetaCallback } from './providers/meta/parse.js';
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

/** Events applied per transaction: a big callback commits in steps and lets other work run between them. */
const BATCH = 100;

/**
 * Processing of stored provider callbacks (job `channels.process-callback`, claimed with a lease like every job):
 * parse, find each event's channel by its provider address, and apply the events in batches, each batch one
 * transaction. Events for an unknown channel are counted and logged, never stored. A worker that dies mid-way
 * leaves the job to be claimed again after its lease: the batches already committed are applied again as no-ops
 * (a provider message id is unique per channel; a status only moves forward), so nothing is lost or doubled.
 */
export function registerCallbackProcessing(runner: JobRunner, deps: { db: Db; log: Logger; counters?: WorkCounters }): JobWorker {
  const { db } = deps;
  const counters = deps.counters ?? noWorkCounters;
  runner.register(CALLBACK_TASK, async (job: ClaimedJob<typeof CALLBACK_TASK>, ctx: JobContext) => {
    const callback = await callbackRepo.get(db, job.payload.callbackId);
    if (!callback || callback.processed_at) return;
    const parsed = parseMetaCallback(JSON.parse(callback.body));
    if (!parsed.ok) {
      // The route checked the envelope before storing it, so this is a parser change since; nothing to apply.
      deps.log.warn({ callbackId: callback.id, reason: parsed.reason }, 'stored callback no longer parses; skipped');
      await finish(db, ctx, callback.id);
      return;
    }
    if (parsed.skipped > 0) counters.callbackItems('meta', 'skipped', parsed.skipped);
    const channels = await channelsOf(db, parsed.events);
    const known: Array<{ event: InboundEvent; channel: ChannelRow }> = [];
    const unknown = new Map<string, number>();
    for (const event of parsed.events) {
      const channel = channels.get(`${event.provider}/${event.channelRef}`);
      if (channel) known.push({ event, channel });
      else unknown.set(`${event.provider}/${event.channelRef}`, (unknown.get(`${event.provider}/${event.channelRef}`) ?? 0) + 1);
    }
    if (unknown.size > 0) {
      const count = [...unknown.values()].reduce((a, b) => a + b, 0);
      counters.callbackItems('meta', 'unknown_channel', count);
      deps.log.warn({ callbackId: callback.id, unknownChannels: Object.fromEntries(unknown) }, 'callback events for no known channel: counted, not stored');
    }
    let applied = 0;
    let duplicates = 0;
    let skipped = 0;
    for (let start = 0; start < known.length || start === 0; start += BATCH) {
      const batch = known.slice(start, start + BATCH);
      const last = start + BATCH >= known.length;
      await db.transaction(async (tx) => {
        const now = ctx.clock.now();
        const inboundChannels = new Set<string>();
        for (const { event, channel } of batch) {
          const outcome = await applyAlone(tx, event, channel, now, deps.log);
          if (outcome === 'applied') applied++;
          else if (outcome === 'duplicate') duplicates++;
          else skipped++;
          if (event.kind === 'message' && !event.echo) inboundChannels.add(channel.id);
        }
        await channelRepo.noteInbound(tx, [...inboundChannels], now);
        if (last) {
          await callbackRepo.markProcessed(tx, callback.id, now);
          await ctx.completeIn(tx);
        }
      });
      // Between batches the event loop serves requests and other jobs.
      if (!last) await yieldToLoop();
    }
    counters.callbackItems('meta', 'applied', applied);
    if (duplicates > 0) counters.callbackItems('meta', 'duplicate', duplicates);
    if (skipped > 0) counters.callbackItems('meta', 'skipped', skipped);
  });
  return {};
}

async function finish(db: Db, ctx: JobContext, callbackId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await callbackRepo.markProcessed(tx, callbackId, ctx.clock.now());
    await ctx.completeIn(tx);
  });
}

/** The channels the events name, by provider and address, in one query per provider. */
async function channelsOf(db: Db, events: readonly InboundEvent[]): Promise<Map<string, ChannelRow>> {
  const refs = new Map<ChannelRow['provider'], Set<string>>();
  for (const event of events) {
    const set = refs.get(event.provider) ?? new Set<string>();
    set.add(event.channelRef);
    refs.set(event.provider, set);
  }
  const found = new Map<string, ChannelRow>();
  for (const [provider, set] of refs) {
    for (const row of await channelRepo.byProviderRefs(db, provider, [...set])) found.set(`${provider}/${row.provider_ref}`, row);
  }
  return found;
}

type Outcome = 'applied' | 'duplicate' | 'skipped';

/**
 * One event under a savepoint: an event our rules refuse (a DomainError, such as a sender without a usable
 * address) is logged and skipped, so one odd item never holds back the rest of the callback; any other error
 * fails the batch and the job retries it.
 */
async function applyAlone(tx: Tx, event: InboundEvent, channel: ChannelRow, now: Date, log: Logger): Promise<Outcome> {
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
      return applyMessage(tx, event, channel, now);
    case 'status':
      return applyStatus(tx, event, channel, now);
    case 'channel_error':
      await channelRepo.noteError(tx, channel.tenant_id, channel.id, event.error, false, now);
      return 'applied';
    case 'watermark':
      return applyWatermark(tx, event, channel, now);
  }
}

/** Messenger and Instagram address guests by page-scoped id: a new contact's profile name is looked up by a job. */
const BY_HANDLE = new Set<ChannelRow['provider']>(['messenger', 'instagram']);

async function applyMessage(tx: Tx, event: InboundMessageEvent, channel: ChannelRow, now: Date): Promise<Outcome> {
  if (event.echo) return applyEcho(tx, event, event.echo.recipient.handle, channel, now);
  const handle = BY_HANDLE.has(channel.provider) ? event.sender.handle : undefined;
  const known = handle ? await conversationRepo.findContactByHandle(tx, channel.tenant_id, handle) : undefined;
  const written = await writeInbound(tx, channel, await inboundInput(tx, event, channel, now), now);
  if (!written) return 'duplicate';
  if (event.media) await queueMediaDownload(tx, now, channel.tenant_id, written.messageId);
  if (handle && !known && !event.sender.profileName) await queueContactProfile(tx, now, channel.tenant_id, channel.id, written.contactId);
  return 'applied';
}

/**
 * A Messenger/Instagram echo: the business's own message. One this service sent (its provider id is on one of our
 * sends) writes nothing; one from another tool is stored as an outbound message with `source: external`
 * (decisions 7.1). A send of the conversation still in its provider call may be this echo's: the event waits.
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
  let moved = 0;
  for (const row of reached.reverse()) {
    if ((await moveStatus(tx, now, row, event.status, null, at)) !== row) moved++;
  }
  return moved > 0 ? 'applied' : 'duplicate';
}

async function applyStatus(tx: Tx, event: DeliveryStatusEvent, channel: ChannelRow, now: Date): Promise<Outcome> {
  const row = await messageRequestRepo.getByProviderId(tx, channel.provider, event.providerMessageId, true);
  if (!row || row.channel_id !== channel.id) return 'skipped';
  const moved = await moveStatus(tx, now, row, event.status, event.error ?? null, event.timestamp);
  if (event.closesWindow) await closeWindow(tx, row.tenant_id, row.conversation_id, event.timestamp);
  return moved === row ? 'duplicate' : 'applied';
}

/** The neutral message as the inbox stores it; provider ids it refers to become our message ids. */
async function inboundInput(tx: Tx, event: InboundMessageEvent, channel: ChannelRow, now: Date): Promise<InboundInput> {
  const ours = (providerId: string | undefined) => (providerId ? conversationRepo.messageIdByProviderId(tx, channel.tenant_id, channel.id, providerId) : Promise.resolve(undefined));
  const replyToMessageId = await ours(event.replyToProviderMessageId);
  const targetMessageId = event.reaction ? await ours(event.reaction.targetProviderMessageId) : undefined;
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
    ...(event.reaction ? { reaction: { emoji: event.reaction.emoji, targetProviderMessageId: event.reaction.targetProviderMessageId, ...(targetMessageId ? { targetMessageId } : {}) } } : {}),
    ...(event.contacts ? { contacts: event.contacts } : {}),
    ...(replyToMessageId ? { replyToMessageId } : {}),
  };
}
