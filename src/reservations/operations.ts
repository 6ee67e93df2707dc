import { ConversationParams } from '../conversations/schema.js';
import { defineOperation } from '../operations/define.js';
import { ConversationReservations, IntegrationSettings, LifecycleSettingBody, LifecycleSettings, LifecycleSettingsParams, ListReservationsQuery, ReservationList } from './schema.js';
import type { ReservationService } from './service.js';

/** What the reservation operations call. */
export interface ReservationOperationServices {
  reservations: ReservationService;
}

const common = { area: 'reservations', tag: 'Reservations' } as const;
const at = '2026-11-24T10:00:00.000Z';
const linked = {
  provider: 'pms',
  integrationId: 'int_5r4e3w2q1a0s9d8f7g6h',
  providerReservationId: 'RES-20261128-0042',
  status: 'confirmed',
  lastSyncedAt: at,
  updatedAt: at,
  integrationName: 'Front desk PMS',
  checkInDate: '2026-11-28',
  checkOutDate: '2026-11-30',
  bookedAt: '2026-10-02T16:20:00.000Z',
  guestFullName: 'Ana Martínez',
  guestPhone: '+52 55 1234 5678',
};
const integration = { integrationId: linked.integrationId, integrationName: linked.integrationName, provider: 'pms', events: [{ eventType: 'pre_checkin' as const, enabled: true, channelId: 'chn_4f5g6h7j8k9l0z1x2c3v' }] };

export const reservationOperations = [
  defineOperation({
    ...common,
    operationId: 'listReservations',
    sdk: 'reservations.list',
    method: 'GET',
    path: '/reservations',
    summary: 'List mirrored reservations',
    description:
      'Reservations mirrored from the business’s PMS (records as last synced, not live availability), 20 per page, filtered by integration, provider reservation id or status and sorted by check-in date or booking time. Continue with nextCursor while hasNext, keeping the same filters and sorting.',
    scopes: ['reservations:read'],
    query: ListReservationsQuery,
    status: 200,
    response: ReservationList,
    errors: [404],
    examples: {
      response: {
        mirrors: [{ ...linked, sourceFreshnessAt: at, attemptsCount: 0, attempts: [] }],
        filters: { integrations: [{ provider: 'pms', integrationId: linked.integrationId, integrationName: linked.integrationName }] },
        availableStatuses: ['confirmed'],
        availableSorts: [{ sortBy: 'check_in_date', sortDir: 'asc', label: 'Check-in date, earliest first' }],
        pageSize: 20,
        hasNext: false,
      },
    },
    handler: (s: ReservationOperationServices, ctx, input) => s.reservations.list(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'listConversationReservations',
    sdk: 'reservations.forConversation',
    method: 'GET',
    path: '/conversations/{conversationId}/reservations',
    summary: 'Reservations linked to a conversation',
    description: 'Up to five mirrored reservations whose guest phone matches the conversation contact’s phone (normalized to E.164), with the total count.',
    scopes: ['reservations:read'],
    params: ConversationParams,
    status: 200,
    response: ConversationReservations,
    errors: [404],
    examples: { response: { conversationId: 'cnv_7h2k9m4p1q8r3s6t0v5w', reservations: [linked], totalCount: 1, matchPhoneNormalized: '+525512345678' } },
    handler: (s: ReservationOperationServices, ctx, input) => s.reservations.forConversation(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'getReservationLifecycleSettings',
    sdk: 'reservations.lifecycleSettings.get',
    method: 'GET',
    path: '/reservations/lifecycle-settings',
    summary: 'Guest-messaging lifecycle settings',
    description: 'Per integration, which lifecycle events (such as pre_checkin) send guest messages and from which sender, plus the senders available.',
    scopes: ['reservations:read'],
    status: 200,
    response: LifecycleSettings,
    examples: { response: { integrations: [integration], senders: [{ channelId: 'chn_4f5g6h7j8k9l0z1x2c3v', name: 'Hotel Sol WhatsApp', phoneNumber: '+34910000000' }] } },
    handler: (s: ReservationOperationServices, ctx) => s.reservations.lifecycleSettings(ctx),
  }),
  defineOperation({
    ...common,
    operationId: 'updateReservationLifecycleSetting',
    sdk: 'reservations.lifecycleSettings.update',
    method: 'PUT',
    path: '/reservations/lifecycle-settings/{integrationId}',
    summary: 'Enable, disable or route one lifecycle event',
    description: 'Enables or disables one lifecycle event of one integration, or selects its sender (an available WhatsApp channel). Changes future messaging only; nothing is sent by this call.',
    scopes: ['reservations:write'],
    params: LifecycleSettingsParams,
    body: LifecycleSettingBody,
    status: 200,
    response: IntegrationSettings,
    errors: [
      404,
      { status: 400, code: 'M2M_INVALID_REQUEST', reason: 'sender_required', message: 'enabling an event needs a sender: give channelId, an available WhatsApp channel', details: { issues: [{ path: 'body.channelId', message: 'enabling an event needs a sender: give channelId, an available WhatsApp channel' }] } },
      { status: 400, code: 'M2M_INVALID_REQUEST', reason: 'channel_not_whatsapp', message: 'the sender must be a WhatsApp channel', details: { issues: [{ path: 'body.channelId', message: 'the sender must be a WhatsApp channel' }] } },
      { status: 400, code: 'M2M_INVALID_REQUEST', reason: 'channel_unavailable', message: 'the WhatsApp channel is not available for sending', details: { issues: [{ path: 'body.channelId', message: 'the WhatsApp channel is not available for sending' }] } },
    ],
    examples: { request: { eventType: 'pre_checkin', enabled: true, channelId: 'chn_4f5g6h7j8k9l0z1x2c3v' }, response: integration },
    handler: (s: ReservationOperationServices, ctx, input) => s.reservations.updateLifecycleSetting(ctx, input),
  }),
];
