import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { ConversationParams } from '../conversations/schema.js';
import type { LifecycleSettingBody, LifecycleSettingsParams, ListReservationsQuery, SyncBody } from './schema.js';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Db, Queryable, Tx } from '../db/driver.js';
import { channelRepo } from '../channels/repo.js';
import { normalizePhone } from '../conversations/phone.js';
import { conversationRepo } from '../conversations/repo.js';
import { DomainError, invalid, notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { newId } from '../ids.js';
import type { OutboundQueue } from '../messaging/outbound.js';
import { propertyRepo, tenantRepo } from '../tenants/repo.js';
import { addDays, isCalendarDate, todayIn } from './dates.js';
import { attemptRepo, senderRepo, settingsRepo } from './lifecycle-repo.js';
import { LifecycleEngine, transitionEvents } from './lifecycle.js';
import type { LifecycleEvent } from './lifecycle-types.js';
import { integrationRepo, mirrorRepo, type MirrorFields, type MirrorRow } from './repo.js';
import { integrationSettingsView, linkedView, mirrorView, senderView } from './views.js';

export const PAGE_SIZE = 20 as const;
const ATTEMPTS_PER_MIRROR = 20;
const LINKED_LIMIT = 5;
const SCAN_BATCH = 200;

export const AVAILABLE_SORTS = [
  { sortBy: 'check_in_date', sortDir: 'asc', label: 'Check-in date, earliest first' },
  { sortBy: 'check_in_date', sortDir: 'desc', label: 'Check-in date, latest first' },
  { sortBy: 'booked_at', sortDir: 'asc', label: 'Booked, oldest first' },
  { sortBy: 'booked_at', sortDir: 'desc', label: 'Booked, newest first' },
] as const;

type SyncInput = Static<typeof SyncBody>;

type ListQuery = Static<typeof ListReservationsQuery>;

function syncFields(input: SyncInput): MirrorFields {
  if (!isCalendarDate(input.checkInDate)) throw invalid('body.checkInDate', 'must be a calendar date YYYY-MM-DD');
  if (!isCalendarDate(input.checkOutDate)) throw invalid('body.checkOutDate', 'must be a calendar date YYYY-MM-DD');
  if (input.checkOutDate < input.checkInDate) throw invalid('body.checkOutDate', 'must not be before checkInDate');
  const raw = input.guestPhone?.trim() || null;
  return {
    status: input.status,
    propertyId: input.propertyId ?? null,
    checkInDate: input.checkInDate,
    checkOutDate: input.checkOutDate,
    bookedAt: new Date(input.bookedAt),
    guestFullName: input.guestFullName,
    guestEmail: input.guestEmail || null,
    guestPhoneRaw: raw,
    guestPhoneE164: raw ? (normalizePhone(raw) ?? null) : null,
    sourceUpdatedAt: input.sourceUpdatedAt ? new Date(input.sourceUpdatedAt) : null,
  };
}

/** True when a sync changes what the mirror shows (sourceUpdatedAt alone is not a change). */
function differs(row: MirrorRow, fields: MirrorFields): boolean {
  return (
    row.status !== fields.status ||
    row.property_id !== fields.propertyId ||
    row.check_in_date !== fields.checkInDate ||
    row.check_out_date !== fields.checkOutDate ||
    row.booked_at.getTime() !== fields.bookedAt.getTime() ||
    row.guest_full_name !== fields.guestFullName ||
    row.guest_email !== fields.guestEmail ||
    row.guest_phone_raw !== fields.guestPhoneRaw
  );
}

function senderError(reason: string, message: string): DomainError {
  return new DomainError('M2M_INVALID_REQUEST', message, { reason, issues: [{ path: 'body.channelId', message }] });
}

/** Reservation mirrors, conversation-linked reservations and the guest-messaging lifecycle settings. */
export class ReservationService {
  private readonly lifecycle: LifecycleEngine;
  private readonly db: Db;
  private readonly clock: Clock;
  private readonly cursors: Cursors;
  private readonly preCheckinDays: number;

  constructor(deps: { db: Db; clock: Clock; cursors: Cursors; outbound: OutboundQueue; log: Logger; preCheckinDays: number }) {
    this.db = deps.db;
    this.clock = deps.clock;
    this.cursors = deps.cursors;
    this.preCheckinDays = deps.preCheckinDays;
    this.lifecycle = new LifecycleEngine({ outbound: deps.outbound, log: deps.log.child({ component: 'lifecycle' }), preCheckinDays: deps.preCheckinDays });
  }

  async createIntegration(tenantId: string, input: { provider: string; name: string }) {
    if (input.provider !== 'pms') throw invalid('body.provider', 'must be pms');
    const row = await integrationRepo.insert(this.db, { id: newId('int'), tenantId, provider: input.provider, name: input.name, now: this.clock.now() });
    return { integrationId: row.id, provider: row.provider, name: row.name };
  }

  /**
   * A provider sync: an idempotent upsert of one mirror. A sync older than the stored sourceUpdatedAt
   * is ignored (the stored mirror is returned unchanged). A change of status runs the lifecycle in the
   * same transaction, so the mirror, its attempts and any queued message commit together.
   */
  async sync(tenantId: string, integrationId: string, providerReservationId: string, input: SyncInput) {
    const fields = syncFields(input);
    return this.db.transaction(async (tx) => {
      if (!(await integrationRepo.get(tx, tenantId, integrationId))) throw notFound('integration');
      if (fields.propertyId && !(await propertyRepo.get(tx, tenantId, fields.propertyId))) throw notFound('property');
      const now = this.clock.now();
      const key = [tenantId, integrationId, providerReservationId] as const;
      let existing = await mirrorRepo.lockByProviderId(tx, ...key);
      let created = false;
      if (!existing) {
        created = await mirrorRepo.insert(tx, { id: newId('rsv'), tenantId, integrationId, providerReservationId, fields, now });
        if (!created) existing = await mirrorRepo.lockByProviderId(tx, ...key);
      }
      let events: LifecycleEvent[] = [];
      if (existing) {
        const stale = fields.sourceUpdatedAt && existing.source_updated_at && fields.sourceUpdatedAt.getTime() < existing.source_updated_at.getTime();
        if (stale) return { created: false, mirror: await this.view(tx, existing) };
        const changed = differs(existing, fields);
        await mirrorRepo.update(tx, tenantId, existing.id, fields, changed, now);
        if (changed) events = transitionEvents(existing.status, fields.status);
      } else {
        events = transitionEvents(undefined, fields.status);
      }
      const mirror = (await mirrorRepo.lockByProviderId(tx, ...key))!;
      if (events.length > 0) {
        const ctx = { tenantId, today: await this.today(tx, tenantId, now), now, trigger: 'sync_transition' as const };
        for (const event of events) await this.lifecycle.evaluate(tx, ctx, mirror, event);
      }
      return { created, mirror: await this.view(tx, mirror) };
    });
  }

  async list({ tenantId }: Ctx, query: ListQuery) {
    const sortBy = query.sortBy ?? 'check_in_date';
    const sortDir = query.sortDir ?? 'asc';
    if (query.integrationId && !(await integrationRepo.get(this.db, tenantId, query.integrationId))) throw notFound('integration');
    const filter = { tenantId, integrationId: query.integrationId, providerReservationId: query.reservationId, status: query.status };
    const binding = { tenantId, integrationId: query.integrationId ?? null, reservationId: query.reservationId ?? null, status: query.status ?? null, sortBy, sortDir };
    const after = query.cursor ? this.cursors.decode<{ v?: unknown; id?: unknown }>('reservations', binding, query.cursor) : undefined;
    if (after && (typeof after.v !== 'string' || typeof after.id !== 'string')) throw new DomainError('M2M_INVALID_CURSOR', 'cursor is invalid');
    const [rows, integrations, statuses] = await Promise.all([
      mirrorRepo.list(this.db, filter, { sortBy, sortDir, limit: PAGE_SIZE + 1, after: after as { v: string; id: string } | undefined }),
      integrationRepo.list(this.db, tenantId),
      mirrorRepo.statuses(this.db, tenantId),
    ]);
    const page = rows.slice(0, PAGE_SIZE);
    const hasNext = rows.length > PAGE_SIZE;
    const last = page[page.length - 1];
    const position = last ? { v: sortBy === 'check_in_date' ? last.check_in_date : last.booked_at.toISOString(), id: last.id } : undefined;
    return {
      mirrors: await this.views(this.db, tenantId, page),
      filters: { integrations: integrations.map((row) => ({ provider: row.provider, integrationId: row.id, integrationName: row.name })) },
      availableStatuses: statuses,
      availableSorts: AVAILABLE_SORTS.map((sort) => ({ ...sort })),
      pageSize: PAGE_SIZE,
      hasNext,
      ...(hasNext && position ? { nextCursor: this.cursors.encode('reservations', binding, position) } : {}),
    };
  }

  /** At most five mirrors whose normalised guest phone is the conversation contact's phone. */
  async forConversation({ tenantId }: Ctx, { conversationId }: Static<typeof ConversationParams>) {
    const conversation = await conversationRepo.get(this.db, tenantId, conversationId);
    if (!conversation) throw notFound('conversation');
    const phone = conversation.contact_phone ? normalizePhone(conversation.contact_phone) : undefined;
    if (!phone) return { conversationId, reservations: [], totalCount: 0 };
    const { rows, total } = await mirrorRepo.byGuestPhone(this.db, tenantId, phone, LINKED_LIMIT);
    return { conversationId, reservations: rows.map(linkedView), totalCount: total, matchPhoneNormalized: phone };
  }

  async lifecycleSettings({ tenantId }: Ctx) {
    const [integrations, settings, senders] = await Promise.all([
      integrationRepo.list(this.db, tenantId),
      settingsRepo.list(this.db, tenantId),
      senderRepo.available(this.db, tenantId),
    ]);
    return { integrations: integrations.map((row) => integrationSettingsView(row, settings)), senders: senders.map(senderView) };
  }

  /**
   * Sets one event of one integration. Enabling needs a sender (given now or already set) that is an
   * available WhatsApp channel of the tenant. Changes future messaging only: nothing is sent here.
   */
  async updateLifecycleSetting({ tenantId }: Ctx, { integrationId, ...input }: Static<typeof LifecycleSettingsParams> & Static<typeof LifecycleSettingBody>) {
    return this.db.transaction(async (tx) => {
      const integration = await integrationRepo.get(tx, tenantId, integrationId);
      if (!integration || integration.provider !== 'pms') throw notFound('integration');
      const current = await settingsRepo.get(tx, tenantId, integrationId, input.eventType);
      const channelId = input.channelId === undefined ? (current?.channel_id ?? null) : input.channelId;
      if (input.channelId) await this.requireSender(tx, tenantId, input.channelId);
      if (input.enabled) {
        if (!channelId) throw senderError('sender_required', 'enabling an event needs a sender: give channelId, an available WhatsApp channel');
        if (input.channelId === undefined) await this.requireSender(tx, tenantId, channelId);
      }
      await settingsRepo.upsert(tx, { tenantId, integrationId, eventType: input.eventType, enabled: input.enabled, channelId, now: this.clock.now() });
      return integrationSettingsView(integration, await settingsRepo.list(tx, tenantId));
    });
  }

  /**
   * The scheduled pre_checkin pass over every tenant: each candidate mirror is locked and evaluated in
   * its own transaction. Returns how many mirrors were looked at.
   */
  async runPreCheckinSchedule(now: Date): Promise<number> {
    const utcToday = now.toISOString().slice(0, 10);
    // One day of slack on each side covers every business timezone; each tenant's own today decides.
    const window = { from: addDays(utcToday, -1), dueUntil: addDays(utcToday, this.preCheckinDays + 1) };
    const zones = new Map<string, string>();
    let afterId = '';
    let seen = 0;
    for (;;) {
      const batch = await mirrorRepo.preCheckinCandidates(this.db, { ...window, afterId, limit: SCAN_BATCH });
      for (const candidate of batch) {
        await this.db.transaction(async (tx) => {
          const mirror = await mirrorRepo.get(tx, candidate.tenant_id, candidate.id, true);
          if (!mirror || mirror.status !== 'confirmed') return;
          if (!zones.has(mirror.tenant_id)) zones.set(mirror.tenant_id, (await tenantRepo.get(tx, mirror.tenant_id))?.timezone ?? 'UTC');
          const ctx = { tenantId: mirror.tenant_id, today: todayIn(zones.get(mirror.tenant_id)!, now), now, trigger: 'schedule' as const };
          await this.lifecycle.preCheckin(tx, ctx, mirror);
        });
      }
      seen += batch.length;
      if (batch.length < SCAN_BATCH) return seen;
      afterId = batch[batch.length - 1].id;
    }
  }

  private async requireSender(db: Queryable, tenantId: string, channelId: string): Promise<void> {
    const channel = await channelRepo.get(db, tenantId, channelId);
    if (!channel) throw notFound('channel');
    if (channel.kind !== 'whatsapp') throw senderError('channel_not_whatsapp', 'the sender must be a WhatsApp channel');
    if (!channel.available) throw senderError('channel_unavailable', 'the WhatsApp channel is not available for sending');
  }

  private async today(tx: Tx, tenantId: string, now: Date): Promise<string> {
    return todayIn((await tenantRepo.get(tx, tenantId))?.timezone ?? 'UTC', now);
  }

  private async view(db: Queryable, mirror: MirrorRow) {
    return (await this.views(db, mirror.tenant_id, [mirror]))[0];
  }

  private async views(db: Queryable, tenantId: string, rows: MirrorRow[]) {
    const attempts = await attemptRepo.latestFor(db, tenantId, rows.map((row) => row.id), ATTEMPTS_PER_MIRROR);
    return rows.map((row) => {
      const own = attempts.filter((attempt) => attempt.reservation_id === row.id);
      return mirrorView(row, own, own[0]?.total ?? 0);
    });
  }
}
