import { noWorkCounters, type WorkCounters } from '../metrics/counters.js';
import type { Db } from '../db/driver.js';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { LeaseLostError, type ClaimedJob, type JobContext, type JobRunner } from '../jobs/runner.js';
import { GroupCommit } from '../util/group-commit.js';
import { WEBHOOKS_CHANNEL, eventRecord } from '../webhooks/events.js';
import { messageRequestRepo, type AcceptedOutcome, type AcceptedSend, type DispatchContent, type DispatchRow, type DispatchStart } from './repo.js';
import type { BlobStore } from '../knowledge/blob-key.js';
import { mediaBlobKey } from '../channels/media-download.js';
import { SEND_TASK } from './outbound.js';
import { moveStatus } from './status.js';
import type { JobWorker } from '../jobs/worker.js';
import { channelRepo } from '../channels/repo.js';
import { ChannelSendError, type ChannelConnection, type MediaKind, type OutboundRequest, type UploadResult } from '../channels/providers/types.js';
import { sendThrough, uploadThrough, type ProviderRegistry } from './providers/registry.js';
import { closeWindow } from './window.js';

/** Dispatch starts, and accepted sends, written together at most, and groups of each written at once (docs/decisions.md, "Replies and sends in groups"). */
const SEND_GROUP = { maxGroup: 32, maxInFlight: 2, minBeside: 1 };

/**
 * Send jobs run at once, in a lane of their own (src/jobs/runner.ts): each mostly waits on the provider's answer, so
 * a busy number needs many calls in flight, and its sends must not hold the slots every other job shares.
 */
export const SEND_SLOTS = 128;

/**
 * The send job. The provider call is bracketed: `dispatching_at` is committed before the call, and the
 * provider message id together with status `sent` and the job's completion are committed right after
 * it. A job that finds a provider message id already recorded never calls the provider again; one that
 * finds `dispatching_at` still set knows a previous worker died mid-call, when the message may or may not
 * have gone out: the provider takes no idempotency key, so it is failed (`send_outcome_unknown`) rather
 * than sent a second time.
 */
export interface SendPipelineDeps {
  db: Db;
  providers: ProviderRegistry;
  /** Where an attachment's bytes were copied when its reply was accepted. */
  blobs: BlobStore;
  /** The channel's connection with its tokens opened (only here, in the job); undefined when it is incomplete. */
  openConnection: (row: DispatchRow) => ChannelConnection | undefined;
  counters?: WorkCounters;
}

/**
 * The neutral request of a queued message (decisions 7.2): the start template with its body parameter, a reaction,
 * an attachment (uploaded first, by `upload`), or text; an answer to a message carries that message's provider id.
 */
async function outboundRequest(row: DispatchRow, upload: (media: NonNullable<DispatchContent['media']>, kind: MediaKind) => Promise<string>): Promise<OutboundRequest> {
  const recipient = { ...(row.recipient_phone ? { phone: row.recipient_phone } : {}), ...(row.recipient_handle ? { handle: row.recipient_handle } : {}) };
  if (row.template_name) return { kind: 'template', name: row.template_name, locale: row.locale ?? 'en_US', bodyParameters: [row.text], recipient };
  const content = row.content;
  const replyTo = content?.replyToProviderMessageId ? { replyToProviderMessageId: content.replyToProviderMessageId } : {};
  if (content?.type === 'reaction' && content.reaction) {
    if (!content.targetProviderMessageId) {
      throw new ChannelSendError('target_not_on_channel', 'the message reacted to was never on the channel (no provider id), so the reaction cannot be sent', { retryable: false });
    }
    return { kind: 'reaction', targetProviderMessageId: content.targetProviderMessageId, emoji: content.reaction.emoji, recipient };
  }
  const mediaKind = MEDIA_KINDS.find((kind) => kind === content?.type);
  if (mediaKind && content?.media) {
    const providerMediaId = await upload(content.media, mediaKind);
    return {
      kind: 'media',
      mediaKind,
      providerMediaId,
      ...(row.text !== '' ? { caption: row.text } : {}),
      ...(content.media.filename ? { filename: content.media.filename } : {}),
      ...replyTo,
      recipient,
    };
  }
  return { kind: 'text', text: row.text, ...replyTo, recipient };
}

const MEDIA_KINDS: readonly MediaKind[] = ['image', 'video', 'audio', 'document'];

export function registerSendPipeline(runner: JobRunner, deps: SendPipelineDeps): JobWorker {
  const { db, providers } = deps;
  const counters = deps.counters ?? noWorkCounters;
  const webhooksChannel = db.notifyName(WEBHOOKS_CHANNEL);
  const inGroups = { ...SEND_GROUP, retryAlone: (error: unknown) => !isDatabaseUnavailable(error) };
  const dispatches = new GroupCommit<DispatchStart, DispatchRow | undefined>((starts) => messageRequestRepo.startDispatches(db, starts), inGroups);
  const acceptances = new GroupCommit<AcceptedSend, AcceptedOutcome>((sends) => messageRequestRepo.recordSendsAccepted(db, sends, webhooksChannel), inGroups);
  runner.register(SEND_TASK, async (job: ClaimedJob<typeof SEND_TASK>, ctx: JobContext) => {
    const { requestEventId } = job.payload;
    const tenantId = job.tenantId ?? '';
    // The usual case: a request still to be sent is marked as being sent and read with its sender, in one statement with the sends starting meanwhile.
    const row = await dispatches.submit({ tenantId, id: requestEventId, at: ctx.clock.now() });
    if (!row) {
      await settleUndispatchable(db, tenantId, requestEventId, ctx, counters);
      return;
    }
    try {
      let connection: ChannelConnection | undefined;
      try {
        connection = deps.openConnection(row);
      } catch {
        connection = undefined; // a token sealed with another key: the channel needs its connection again
      }
      if (!connection) throw new ChannelSendError('channel_not_connected', `the channel's ${row.channel_provider} connection is incomplete; set it with PATCH /tenants/{tenantId}/channels/{channelId}`, { retryable: false });
      const open = connection;
      // An attachment is uploaded once: its provider media id is kept with the message, and a retried send reuses it.
      const upload = async (media: NonNullable<DispatchContent['media']>, mediaKind: MediaKind): Promise<string> => {
        if (media.providerMediaId) return media.providerMediaId;
        const bytes = await deps.blobs.get(mediaBlobKey(tenantId, row.reply_id));
        if (!bytes) throw new ChannelSendError('media_missing', 'the attachment\'s bytes are no longer stored', { retryable: false });
        const file = { mediaKind, contentType: media.contentType, filename: media.filename ?? 'attachment', bytes };
        let uploaded: UploadResult;
        try {
          uploaded = await uploadThrough(providers, file, open, ctx.signal);
        } catch (error) {
          // An upload sends nothing to the guest: whatever its answer, the send may be tried again.
          if (error instanceof ChannelSendError && error.mayHaveBeenSent) throw new ChannelSendError(error.code, error.message, { retryable: error.retryable });
          throw error;
        }
        await messageRequestRepo.noteUploaded(db, tenantId, row.reply_id, uploaded.providerMediaId);
        return uploaded.providerMediaId;
      };
      const request = await outboundRequest(row, upload);
      const accepted = await sendThrough(providers, request, connection, ctx.signal);
      // A reaction may create no message at the provider (Messenger, Instagram): accepted is enough.
      if (!accepted.providerMessageId && request.kind !== 'reaction') throw new ChannelSendError('provider_bad_response', 'the provider accepted the message without an id', { retryable: false, mayHaveBeenSent: true });
      const now = ctx.clock.now();
      const event = eventRecord(now, tenantId, 'message.delivery.updated', {
        requestEventId: row.id,
        status: 'sent',
        replyId: row.reply_id,
        conversationId: row.conversation_id,
        ...(accepted.providerMessageId ? { providerMessageId: accepted.providerMessageId } : {}),
      });
      const providerMessageId = accepted.providerMessageId ?? null;
      const recorded = await acceptances.submit({
        tenantId,
        requestId: row.id,
        providerMessageId,
        at: now,
        ...ctx.lease,
        eventId: event.eventId,
        eventBody: event.body,
        eventReadScope: event.readScope,
        eventWriteScope: event.writeScope,
      });
      if (recorded.outcome === 'missing') throw new Error(`message request ${row.id} disappeared during its send`);
      if (recorded.outcome === 'lease_lost') throw new LeaseLostError(job.id);
      ctx.completed();
      await channelRepo.noteOutbound(db, tenantId, row.channel_id, now);
      if (recorded.deliveries > 0) db.wake(WEBHOOKS_CHANNEL);
      counters.sendOutcome('sent');
      ctx.log.info({ requestEventId, providerMessageId: accepted.providerMessageId }, 'message accepted by the provider');
    } catch (error) {
      if (error instanceof LeaseLostError) throw error;
      const failure = error instanceof ChannelSendError ? error : new ChannelSendError('send_error', 'unexpected error while sending', { retryable: true });
      await messageRequestRepo.recordDispatchError(db, tenantId, row.id, { code: failure.code, message: failure.message }, ctx.clock.now());
      // Retried only when the provider surely did not take it (it answered a refusal, or was never reached): the
      // Cloud API takes no idempotency key, so a request whose answer is unknown is never sent again.
      if (failure.retryable && !failure.mayHaveBeenSent && job.attempts < job.maxAttempts) {
        counters.sendOutcome('retrying');
        throw failure; // the runner retries with backoff
      }
      const code = failure.mayHaveBeenSent ? 'send_outcome_unknown' : failure.code;
      const message = failure.mayHaveBeenSent ? `${failure.message}; the provider may have sent it, so it is not sent again (${failure.code})` : failure.message;
      const authFailed = 'authFailed' in failure && failure.authFailed === true;
      await db.transaction(async (tx) => {
        const locked = (await messageRequestRepo.get(tx, tenantId, row.id, true))!;
        await moveStatus(tx, ctx.clock.now(), locked, 'failed', { code, message });
        if (failure.closesWindow) await closeWindow(tx, tenantId, row.conversation_id, ctx.clock.now());
        if (failure.code !== 'send_error') await channelRepo.noteError(tx, tenantId, row.channel_id, { code: failure.code, message: failure.message }, authFailed, ctx.clock.now());
        await ctx.completeIn(tx);
      });
      counters.sendOutcome('failed');
      ctx.log.warn({ requestEventId, code }, 'send failed');
    }
  });
  return {};
}

/**
 * A request the send job may not dispatch: unknown (dropped), already sent or failed (never sent twice), or with
 * a provider call started by a worker that died during it (failed, since its outcome is unknown).
 */
async function settleUndispatchable(db: Db, tenantId: string, requestEventId: string, ctx: JobContext, counters: WorkCounters): Promise<void> {
  const row = await messageRequestRepo.get(db, tenantId, requestEventId);
  if (!row) {
    ctx.log.warn({ requestEventId }, 'send job for an unknown message request; dropping');
    return;
  }
  if (row.status !== 'queued' || row.provider_message_id || !row.dispatching_at) return;
  await messageRequestRepo.noteUnknownOutcome(db, tenantId, row.id, ctx.clock.now());
  await db.transaction(async (tx) => {
    const locked = (await messageRequestRepo.get(tx, tenantId, row.id, true))!;
    await moveStatus(tx, ctx.clock.now(), locked, 'failed', {
      code: 'send_outcome_unknown',
      message: 'the worker stopped during the provider call, so the message may or may not have been sent; check with the recipient before sending again',
    });
    await ctx.completeIn(tx);
  });
  counters.sendOutcome('failed');
  ctx.log.error({ requestEventId }, 'send failed: its worker stopped during the provider call (outcome unknown, not sent again)');
}
