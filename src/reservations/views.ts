import { iso } from '../util/time.js';
import { LIFECYCLE_EVENTS } from './lifecycle-types.js';
import type { AttemptRow, SenderRow, SettingRow } from './lifecycle-repo.js';
import type { IntegrationRow, MirrorRow } from './repo.js';

/** Where a dashboard shows the conversation: a path relative to the dashboard's base URL. */
export function conversationLink(conversationId: string): string {
  return `/conversations/${encodeURIComponent(conversationId)}`;
}

export function attemptView(row: AttemptRow) {
  return {
    createdAt: iso(row.created_at)!,
    lifecycleEventType: row.event_type,
    result: row.result,
    reason: row.reason,
    attemptCount: row.attempt_count,
    duplicateCount: row.duplicate_count,
    triggerSource: row.trigger_source,
    senderPhoneNumber: row.sender_phone ?? undefined,
    senderLabel: row.sender_label ?? undefined,
    conversationId: row.conversation_id ?? undefined,
    conversationLink: row.conversation_id ? conversationLink(row.conversation_id) : undefined,
    requestEventId: row.request_event_id ?? undefined,
  };
}

/** The fields a conversation-linked reservation and a list mirror share. */
function baseView(row: MirrorRow) {
  return {
    provider: row.provider,
    integrationId: row.integration_id,
    providerReservationId: row.provider_reservation_id,
    status: row.status,
    lastSyncedAt: iso(row.last_synced_at)!,
    updatedAt: iso(row.updated_at)!,
    integrationName: row.integration_name,
    propertyId: row.property_id ?? undefined,
    propertyName: row.property_name ?? undefined,
    checkInDate: row.check_in_date,
    checkOutDate: row.check_out_date,
    bookedAt: iso(row.booked_at)!,
    guestFullName: row.guest_full_name,
    guestPhone: row.guest_phone_raw ?? undefined,
  };
}

export function linkedView(row: MirrorRow) {
  return baseView(row);
}

export function mirrorView(row: MirrorRow, attempts: AttemptRow[], attemptsCount: number) {
  return {
    ...baseView(row),
    sourceUpdatedAt: iso(row.source_updated_at),
    sourceFreshnessAt: iso(row.source_freshness_at)!,
    guestEmail: row.guest_email ?? undefined,
    guestPhoneNormalized: row.guest_phone_e164 ?? undefined,
    attemptsCount,
    attempts: attempts.map(attemptView),
  };
}

export function integrationSettingsView(integration: IntegrationRow, settings: SettingRow[]) {
  return {
    integrationId: integration.id,
    integrationName: integration.name,
    provider: integration.provider,
    events: LIFECYCLE_EVENTS.map((eventType) => {
      const row = settings.find((setting) => setting.integration_id === integration.id && setting.event_type === eventType);
      return { eventType, enabled: row?.enabled ?? false, channelId: row?.channel_id ?? null };
    }),
  };
}

export function senderView(row: SenderRow) {
  return { channelId: row.id, name: row.name, phoneNumber: row.phone_number };
}
