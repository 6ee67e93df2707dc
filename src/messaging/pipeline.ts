import { noWorkCounters, type WorkCounters } from '../metrics/counters.js';
import type { Db } from '../db/driver.js';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { LeaseLostError, type ClaimedJob, type JobContext, type JobRunner } from '../jobs/runner.js';
import { GroupCommit } from '../util/group-commit.js';
import { WEBHOOKS_CHANNEL, eventRecord } from '../webhooks/events.js';
import { messageRequestRepo, type AcceptedOutcome, type AcceptedSend, type DispatchRow, type DispatchStart } from './repo.js';
import { SEND_TASK } from './outbound.js';
import { moveStatus } from './status.js';
import { ProviderError, type ChannelProvider } from './providers/types.js';
import type { JobWorker } from '../jobs/worker.js';

/** Dispatch starts, and accepted sends, written together at most, and groups of each written at once (docs/decisions.md, "Replies and sends in groups"). */
const SEND_GROUP = { maxGroup: 32, maxInFlight: 2, minBeside: 1 };

/**
 * The send job. The provider call is bracketed: `dispatching_at` is committed before the call, and the
 * provider message id together with status `sent` and the job's completion are committed right after
 * it. A job that finds a provider message id already recorded never calls the provider again; one that
 * finds `dispatching_at` still set knows a previous worker died mid-call, when the message may or may not
 * have gone out: the provider takes no idempotency key, so it is failed (`send_outcome_unknown`) rather
 * than sent a second time.
 */
export function registerSendPipeline(runner: JobRunner, deps: { db: Db; provider: ChannelProvider; counters?: WorkCounters }): JobWorker {
  const { db, provider } = deps;
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
      const accepted = await provider.send(
        {
          requestEventId: row.id,
          channelKind: row.channel_kind,
          senderRef: row.sender_ref,
          to: row.recipient_phone,
          conversationId: row.conversation_id,
          template: row.template_name ? { name: row.template_name, locale: row.locale ?? 'en_US' } : undefined,
          text: row.text,
        },
        ctx.signal,
      );
      const now = ctx.clock.now();
      const event = eventRecord(now, tenantId, 'message.delivery.updated', {
        requestEventId: row.id,
        status: 'sent',
        replyId: row.reply_id,
        conversationId: row.conversation_id,
        providerMessageId: accepted.providerMessageId,
      });
      const recorded = await acceptances.submit({
        tenantId,
        requestId: row.id,
        providerMessageId: accepted.providerMessageId,
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
      if (recorded.deliveries > 0) db.wake(WEBHOOKS_CHANNEL);
      counters.sendOutcome('sent');
      ctx.log.info({ requestEventId, providerMessageId: accepted.providerMessageId }, 'message accepted by the provider');
    } catch (error) {
      const failure = error instanceof ProviderError ? error : new ProviderError('send_error', 'unexpected error while sending', true);
      await messageRequestRepo.recordDispatchError(db, tenantId, row.id, { code: failure.code, message: failure.message }, ctx.clock.now());
      if (failure.retryable && job.attempts < job.maxAttempts) {
        counters.sendOutcome('retrying');
        throw failure; // the runner retries with backoff
      }
      await db.transaction(async (tx) => {
        const locked = (await messageRequestRepo.get(tx, tenantId, row.id, true))!;
        await moveStatus(tx, ctx.clock.now(), locked, 'failed', { code: failure.code, message: failure.message });
        await ctx.completeIn(tx);
      });
      counters.sendOutcome('failed');
      ctx.log.warn({ requestEventId, code: failure.code }, 'send failed');
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
