import type { Logger } from 'pino';
import type { Tx } from '../db/driver.js';
import { channelRepo, type ChannelRow } from '../channels/repo.js';
import { sendLifecycleMessage } from '../messaging/lifecycle-send.js';
import type { OutboundQueue } from '../messaging/outbound.js';
import { addDays } from './dates.js';
import { attemptRepo, savepoints, settingsRepo, type AttemptRow } from './lifecycle-repo.js';
import { sendRefusal } from '../messaging/send-rules.js';
import { mirrorRepo, type MirrorRow } from './repo.js';
import type { AttemptResult, LifecycleEvent } from './lifecycle-types.js';

export type TriggerSource = 'sync_transition' | 'schedule';

/** The provider statuses the lifecycle reacts to. Any other status is mirrored but raises nothing. */
export const CONFIRMED = 'confirmed';
export const CHECKED_OUT = 'checked_out';

/** Events a sync raises: a status that becomes confirmed or checked_out (first sight counts as becoming). */
export function transitionEvents(previous: string | undefined, next: string): LifecycleEvent[] {
  const events: LifecycleEvent[] = [];
  if (next === CONFIRMED && previous !== CONFIRMED) events.push('booking_confirmed');
  if (next === CHECKED_OUT && previous !== CHECKED_OUT) events.push('post_checkout_review');
  return events;
}

export interface EvaluationContext {
  tenantId: string;
  /** Today in the business timezone, `YYYY-MM-DD`. */
  today: string;
  now: Date;
  trigger: TriggerSource;
}

interface Outcome {
  result: AttemptResult;
  reason: string;
  sender?: ChannelRow;
  conversationId?: string | null;
  requestEventId?: string;
  duplicateCount?: number;
}

/** The short guest-facing text of each event. */
export function guestText(event: LifecycleEvent, mirror: Pick<MirrorRow, 'guest_full_name' | 'property_name' | 'check_in_date' | 'check_out_date'>): string {
  const name = mirror.guest_full_name.trim().split(/\s+/)[0] || 'there';
  const at = mirror.property_name ? ` at ${mirror.property_name}` : '';
  switch (event) {
    case 'booking_confirmed':
      return `Hi ${name}, your reservation${at} is confirmed: check-in ${mirror.check_in_date}, check-out ${mirror.check_out_date}. Reply here if you have any questions.`;
    case 'pre_checkin':
      return `Hi ${name}, we look forward to welcoming you${at} on ${mirror.check_in_date}. Reply here if you need anything before you arrive.`;
    case 'post_checkout_review':
      return `Hi ${name}, thank you for staying with us${at}. We would love to hear how your stay went.`;
  }
}

/**
 * Decides, for one reservation and lifecycle event, whether a guest message goes out, and records the
 * decision as an attempt. A send is queued through the OutboundQueue in the caller's transaction, so
 * mirror, attempt and message request commit together or not at all.
 */
export class LifecycleEngine {
  constructor(private readonly deps: { outbound: OutboundQueue; log: Logger; preCheckinDays: number }) {}

  /** The first day pre_checkin may be sent for a stay starting on `checkInDate`. */
  preCheckinDueFrom(checkInDate: string): string {
    return addDays(checkInDate, -this.deps.preCheckinDays);
  }

  /** Evaluates one event inside a savepoint: an unexpected failure is recorded as an `error` attempt, the sync still commits. */
  async evaluate(tx: Tx, ctx: EvaluationContext, mirror: MirrorRow, event: LifecycleEvent): Promise<AttemptRow> {
    await savepoints.open(tx);
    try {
      const outcome = await this.decide(tx, ctx, mirror, event);
      const attempt = await this.record(tx, ctx, mirror, event, outcome);
      await savepoints.release(tx);
      return attempt;
    } catch (error) {
      await savepoints.rollback(tx);
      await savepoints.release(tx);
      this.deps.log.error({ err: error, tenantId: ctx.tenantId, reservationId: mirror.id, event }, 'lifecycle evaluation failed');
      return this.record(tx, ctx, mirror, event, { result: 'error', reason: 'unexpected_error' });
    }
  }

  /**
   * The scheduled pre_checkin step for one confirmed mirror (locked by the caller). Not yet due: one
   * `deferred` attempt per check-in date when the event is enabled (silently noted otherwise). Due:
   * evaluated once for that check-in date.
   */
  async preCheckin(tx: Tx, ctx: EvaluationContext, mirror: MirrorRow): Promise<AttemptRow | undefined> {
    if (mirror.check_in_date < ctx.today) {
      await mirrorRepo.setPreCheckin(tx, ctx.tenantId, mirror.id, mirror.check_in_date, 'done');
      return undefined;
    }
    if (ctx.today < this.preCheckinDueFrom(mirror.check_in_date)) {
      if (mirror.pre_checkin_for === mirror.check_in_date) return undefined;
      const setting = await settingsRepo.get(tx, ctx.tenantId, mirror.integration_id, 'pre_checkin');
      const attempt = setting?.enabled ? await this.evaluate(tx, ctx, mirror, 'pre_checkin') : undefined;
      await mirrorRepo.setPreCheckin(tx, ctx.tenantId, mirror.id, mirror.check_in_date, 'deferred');
      return attempt;
    }
    const attempt = await this.evaluate(tx, ctx, mirror, 'pre_checkin');
    await mirrorRepo.setPreCheckin(tx, ctx.tenantId, mirror.id, mirror.check_in_date, 'done');
    return attempt;
  }

  private invalidReason(mirror: MirrorRow, event: LifecycleEvent, today: string): string | undefined {
    if (event === 'booking_confirmed' && mirror.check_out_date < today) return 'stay_already_ended';
    if (event === 'pre_checkin' && mirror.check_in_date < today) return 'check_in_date_passed';
    if (event === 'post_checkout_review' && mirror.check_in_date > today) return 'checked_out_before_check_in_date';
    return undefined;
  }

  private async decide(tx: Tx, ctx: EvaluationContext, mirror: MirrorRow, event: LifecycleEvent): Promise<Outcome> {
    const { tenantId, now } = ctx;
    const setting = await settingsRepo.get(tx, tenantId, mirror.integration_id, event);
    const sender = setting?.channel_id ? await channelRepo.get(tx, tenantId, setting.channel_id) : undefined;
    const skipped = (reason: string): Outcome => ({ result: 'skipped', reason, sender });

    const invalidReason = this.invalidReason(mirror, event, ctx.today);
    if (invalidReason) return { result: 'invalid', reason: invalidReason, sender };
    const sent = await attemptRepo.findSend(tx, tenantId, mirror.id, event);
    if (sent) {
      const duplicateCount = await attemptRepo.bumpDuplicate(tx, tenantId, sent.id);
      return { result: 'duplicate', reason: 'already_sent', sender, conversationId: sent.conversation_id, duplicateCount };
    }
    if (event === 'pre_checkin') {
      const dueFrom = this.preCheckinDueFrom(mirror.check_in_date);
      if (ctx.today < dueFrom) return { result: 'deferred', reason: `not_due (due from ${dueFrom})`, sender };
    }
    if (!setting?.enabled) return skipped('event_disabled');
    if (!sender) return skipped('no_sender');
    if (sender.kind !== 'whatsapp' || (await sendRefusal(tx, { channelAvailable: sender.available })) === 'channel_unavailable') return skipped('sender_unavailable');
    const phone = mirror.guest_phone_e164;
    if (!phone) return skipped(mirror.guest_phone_raw ? 'guest_phone_invalid' : 'no_guest_phone');
    const send = await sendLifecycleMessage(tx, this.deps.outbound, now, { tenantId, sender, phone, text: guestText(event, mirror) });
    if ('skipped' in send) return skipped(send.skipped);
    return { result: 'would_send', reason: send.withTemplate ? 'queued_with_template' : 'queued', sender, conversationId: send.conversationId, requestEventId: send.requestEventId };
  }

  private record(tx: Tx, ctx: EvaluationContext, mirror: MirrorRow, event: LifecycleEvent, outcome: Outcome): Promise<AttemptRow> {
    return attemptRepo.insert(tx, {
      tenant_id: ctx.tenantId,
      reservation_id: mirror.id,
      event_type: event,
      result: outcome.result,
      reason: outcome.reason,
      trigger_source: ctx.trigger,
      duplicate_count: outcome.duplicateCount ?? 0,
      sender_channel_id: outcome.sender?.id ?? null,
      sender_phone: outcome.sender?.phone_number ?? null,
      sender_label: outcome.sender?.name ?? null,
      conversation_id: outcome.conversationId ?? null,
      request_event_id: outcome.requestEventId ?? null,
      now: ctx.now,
    });
  }
}
