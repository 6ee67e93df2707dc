import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Db, Tx } from '../db/driver.js';
import { DomainError } from '../errors.js';
import type { BatchContext, ClaimedJob, JobRunner } from '../jobs/runner.js';
import type { JobWorker } from '../jobs/worker.js';
import { noWorkCounters, type WorkCounters } from '../metrics/counters.js';
import { contactAddress } from '../conversations/inbox.js';
import { writeInboundBatch, type InboundBatchItem } from '../conversations/inbound-batch.js';
import { CALLBACK_TASK, callbackRepo } from './callback-repo.js';
import { applyAlone, applyStatuses, isDeliveryStatus, isGuestMessage, messageInput, type Outcome } from './callback-events.js';
import { queueMediaDownload } from './media-download.js';
import { queueContactProfile } from './contact-profile.js';
import { channelRepo, type ChannelRow } from './repo.js';
import { parseMetaCallback } from './providers/meta/parse.js';
import type { DeliveryStatusEvent, InboundEvent, InboundMessageEvent } from './providers/types.js';

/** Events applied per transaction: a big callback commits in steps and lets other work run between them. */
const BATCH = 100;
/** Callbacks claimed together: a busy number's callbacks (usually one message each) are written a step at a time. */
const MAX_CALLBACKS = 500;

interface Deps {
  db: Db;
  log: Logger;
  counters: WorkCounters;
}

/** A claimed callback: its job, its stored row (none when already processed or gone) and its events of known channels. */
interface Claimed {
  job: ClaimedJob<typeof CALLBACK_TASK>;
  callbackId: string | undefined;
  events: Known[];
}

interface Known {
  event: InboundEvent;
  channel: ChannelRow;
}

/** Part of one step: some of a callback's events; the last part marks the callback processed and completes its job. */
interface Part {
  claimed: Claimed;
  events: Known[];
  last: boolean;
}

type Tally = Record<Outcome, number>;

/**
 * Processing of stored provider callbacks (job `channels.process-callback`, claimed with a lease like every job,
 * many at once): parse, find each event's channel by its provider address, and apply the events in steps of up to
 * BATCH events, each step one transaction that also marks the callbacks it finishes processed and completes their
 * jobs. Guests' messages (writeInboundBatch) and delivery statuses (applyStatuses) are written a group at a time; other
 * events one at a time, in order.
 * Events for an unknown channel are counted and logged, never stored. A step that fails is applied again callback by
 * callback, so one callback's error (or an echo that must wait) is never another's. A worker that dies mid-way leaves
 * the jobs to be claimed again after their lease: the steps already committed are applied again as no-ops (a
 * provider message id is unique per channel; a status only moves forward), so nothing is lost or doubled.
 */
export function registerCallbackProcessing(runner: JobRunner, deps: { db: Db; log: Logger; counters?: WorkCounters }): JobWorker {
  const all: Deps = { ...deps, counters: deps.counters ?? noWorkCounters };
  runner.registerBatch(CALLBACK_TASK, (jobs, ctx) => processCallbacks(all, jobs, ctx), MAX_CALLBACKS);
  return {};
}

async function processCallbacks(deps: Deps, jobs: Array<ClaimedJob<typeof CALLBACK_TASK>>, ctx: BatchContext): Promise<Map<number, unknown>> {
  const failures = new Map<number, unknown>();
  const steps = plan(await load(deps, jobs));
  for (const [index, step] of steps.entries()) {
    // Shutting down: the jobs left are released (src/jobs/runner.ts) and claimed again.
    if (ctx.signal.aborted) break;
    const parts = step.filter((part) => !failures.has(part.claimed.job.id));
    if (parts.length === 0) continue;
    try {
      await applyStep(deps, parts, ctx);
    } catch (error) {
      const ofJobs = new Map<number, Part[]>();
      for (const part of parts) ofJobs.set(part.claimed.job.id, [...(ofJobs.get(part.claimed.job.id) ?? []), part]);
      if (ofJobs.size === 1) failures.set(parts[0].claimed.job.id, error);
      else {
        for (const [jobId, own] of ofJobs) await applyStep(deps, own, ctx).catch((itsError: unknown) => failures.set(jobId, itsError));
      }
    }
    // Between steps the event loop serves requests and other jobs.
    if (index < steps.length - 1) await yieldToLoop();
  }
  return failures;
}

/** The claimed callbacks, parsed, their events matched to their channels (one query per provider for them all). */
async function load(deps: Deps, jobs: Array<ClaimedJob<typeof CALLBACK_TASK>>): Promise<Claimed[]> {
  const rows = new Map((await callbackRepo.getMany(deps.db, jobs.map((job) => job.payload.callbackId))).map((row) => [row.id, row]));
  const parsed = jobs.map((job) => {
    const callback = rows.get(job.payload.callbackId);
    if (!callback || callback.processed_at) return { job, callbackId: undefined, events: [] };
    const result = parseMetaCallback(parsedJson(callback.body));
    if (!result.ok) {
      // The route checked the envelope before storing it, so this is a parser change since; nothing to apply.
      deps.log.warn({ callbackId: callback.id, reason: result.reason }, 'stored callback no longer parses; skipped');
      return { job, callbackId: callback.id, events: [] };
    }
    if (result.skipped > 0) deps.counters.callbackItems('meta', 'skipped', result.skipped);
    return { job, callbackId: callback.id, events: result.events };
  });
  const channels = await channelsOf(deps.db, parsed.flatMap((p) => p.events));
  return parsed.map(({ job, callbackId, events }) => {
    const known: Known[] = [];
    const unknown = new Map<string, number>();
    for (const event of events) {
      const ref = `${event.provider}/${event.channelRef}`;
      const channel = channels.get(ref);
      if (channel) known.push({ event, channel });
      else unknown.set(ref, (unknown.get(ref) ?? 0) + 1);
    }
    if (unknown.size > 0) {
      deps.counters.callbackItems('meta', 'unknown_channel', [...unknown.values()].reduce((a, b) => a + b, 0));
      deps.log.warn({ callbackId, unknownChannels: Object.fromEntries(unknown) }, 'callback events for no known channel: counted, not stored');
    }
    return { job, callbackId, events: known };
  });
}

/** The stored body as JSON; undefined (which no parser takes) when it is not JSON: the route stores only JSON. */
function parsedJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** The callbacks' events cut into steps of at most BATCH events: small callbacks share a step, a big one spans several. */
function plan(claimed: readonly Claimed[]): Part[][] {
  const steps: Part[][] = [];
  let step: Part[] = [];
  let size = 0;
  for (const callback of claimed) {
    for (let start = 0; start < callback.events.length || start === 0; start += BATCH) {
      const events = callback.events.slice(start, start + BATCH);
      if (step.length > 0 && size + events.length > BATCH) {
        steps.push(step);
        step = [];
        size = 0;
      }
      step.push({ claimed: callback, events, last: start + BATCH >= callback.events.length });
      size += events.length;
    }
  }
  if (step.length > 0) steps.push(step);
  return steps;
}

/** One step, one transaction: its events in order, the callbacks it finishes marked processed and their jobs completed. */
async function applyStep(deps: Deps, parts: readonly Part[], ctx: BatchContext): Promise<void> {
  const tally: Tally = { applied: 0, duplicate: 0, skipped: 0 };
  await deps.db.transaction(async (tx) => {
    const now = ctx.clock.now();
    const events = parts.flatMap((part) => part.events);
    // Guests' messages and delivery statuses are written a group at a time (they touch different rows, so the two
    // groups need no order between them); any other event waits for the groups before it and runs alone.
    let guests: Known[] = [];
    let statuses: Array<{ event: DeliveryStatusEvent; channel: ChannelRow }> = [];
    const flush = async () => {
      await applyGuestMessages(tx, guests, now, deps.log, tally);
      if (statuses.length > 0) for (const outcome of await applyStatuses(tx, statuses, now)) tally[outcome]++;
      guests = [];
      statuses = [];
    };
    for (const known of events) {
      if (isGuestMessage(known.event)) guests.push(known);
      else if (isDeliveryStatus(known.event)) statuses.push({ event: known.event, channel: known.channel });
      else {
        await flush();
        tally[await applyAlone(tx, known.event, known.channel, now, deps.log)]++;
      }
    }
    await flush();
    await channelRepo.noteInbound(tx, [...new Set(events.filter((known) => isGuestMessage(known.event)).map((known) => known.channel.id))], now);
    const finished = parts.filter((part) => part.last).map((part) => part.claimed);
    await callbackRepo.markProcessed(tx, finished.flatMap((claimed) => (claimed.callbackId ? [claimed.callbackId] : [])), now);
    await ctx.completeIn(tx, finished.map((claimed) => claimed.job.id));
  });
  deps.counters.callbackItems('meta', 'applied', tally.applied);
  if (tally.duplicate > 0) deps.counters.callbackItems('meta', 'duplicate', tally.duplicate);
  if (tally.skipped > 0) deps.counters.callbackItems('meta', 'skipped', tally.skipped);
}

/** Messenger and Instagram address guests by page-scoped id: a new contact's profile name is looked up by a job. */
const BY_HANDLE = new Set<ChannelRow['provider']>(['messenger', 'instagram']);

/**
 * Guests' messages, written as one group. A sender without a usable address is refused (logged and skipped) as
 * the inbox would refuse it; a message with media queues its download, a new Messenger/Instagram contact without a
 * name its profile lookup.
 */
async function applyGuestMessages(tx: Tx, guests: readonly Known[], now: Date, log: Logger, tally: Tally): Promise<void> {
  if (guests.length === 0) return;
  const items: Array<InboundBatchItem & { event: InboundMessageEvent }> = [];
  for (const { event, channel } of guests) {
    if (!isGuestMessage(event)) continue;
    const input = messageInput(event, now);
    try {
      contactAddress(input.contact);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      log.warn({ channelId: channel.id, kind: event.kind, reason: error.message }, 'callback event refused; skipped');
      tally.skipped++;
      continue;
    }
    items.push({ channel, input, event, ...(event.replyToProviderMessageId ? { replyToProviderMessageId: event.replyToProviderMessageId } : {}) });
  }
  const written = await writeInboundBatch(tx, items, now);
  const profiled = new Set<string>();
  for (const [index, { channel, event }] of items.entries()) {
    const done = written[index];
    if (!done) {
      tally.duplicate++;
      continue;
    }
    tally.applied++;
    if (event.media) await queueMediaDownload(tx, now, channel.tenant_id, done.messageId);
    const byHandle = BY_HANDLE.has(channel.provider) && event.sender.handle !== undefined;
    if (byHandle && done.contactCreated && !profiled.has(done.contactId)) {
      profiled.add(done.contactId);
      if (!event.sender.profileName) await queueContactProfile(tx, now, channel.tenant_id, channel.id, done.contactId);
    }
  }
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
