import { defineOperation } from '../operations/define.js';
import type { ReservationHistoryService } from './history.js';
import { AttemptList, AttemptsParams, AttemptsQuery, ReceiptList, ReceiptsQuery } from './schema.js';

/** What the lifecycle history reads call. */
export interface ReservationHistoryOperationServices {
  reservationHistory: ReservationHistoryService;
}

const common = { area: 'reservations', tag: 'Reservations', extension: true } as const;
const at = '2026-11-24T10:00:00.000Z';
const conversationId = 'cnv_7h2k9m4p1q8r3s6t0v5w';
const requestEventId = 'mrq_6y5t4r3e2w1q0p9o8i7u';

export const reservationHistoryOperations = [
  defineOperation({
    ...common,
    operationId: 'listReservationAttempts',
    sdk: 'reservations.attempts',
    method: 'GET',
    path: '/reservations/{integrationId}/{providerReservationId}/attempts',
    summary: "A reservation's lifecycle attempts, newest first",
    description:
      'Every evaluation of a guest-messaging lifecycle event for one mirrored reservation, newest first, 20 per page; continue with nextCursor while hasNext. Attempts are diagnostics, not delivery receipts.',
    scopes: ['reservations:read'],
    params: AttemptsParams,
    query: AttemptsQuery,
    status: 200,
    response: AttemptList,
    errors: [404],
    examples: {
      response: {
        attempts: [
          {
            createdAt: at,
            lifecycleEventType: 'booking_confirmed',
            result: 'would_send',
            reason: 'queued',
            attemptCount: 1,
            duplicateCount: 0,
            triggerSource: 'sync_transition',
            senderPhoneNumber: '+525512345678',
            senderLabel: 'Front desk WhatsApp',
            conversationId,
            conversationLink: `/conversations/${conversationId}`,
            requestEventId,
          },
        ],
        pageSize: 20,
        hasNext: false,
      },
    },
    handler: (s: ReservationHistoryOperationServices, ctx, input) => s.reservationHistory.attempts(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'listLifecycleReceipts',
    sdk: 'reservations.lifecycleReceipts',
    method: 'GET',
    path: '/reservations/lifecycle-receipts',
    summary: 'Guest-messaging lifecycle receipts, newest first',
    description:
      'The messages the guest-messaging lifecycle queued (booking confirmed, pre-check-in, post-checkout review), newest first, 20 per page, with each message request’s current status: a receipt is not proof of delivery until its status is delivered. Continue with nextCursor while hasNext, keeping the filters.',
    scopes: ['reservations:read'],
    query: ReceiptsQuery,
    status: 200,
    response: ReceiptList,
    errors: [404],
    examples: {
      response: {
        receipts: [
          { integrationId: 'int_5r4e3w2q1a0s9d8f7g6h', providerReservationId: 'RES-20261128-0042', lifecycleEventType: 'booking_confirmed', conversationId, requestEventId, status: 'delivered', createdAt: at },
        ],
        pageSize: 20,
        hasNext: false,
      },
    },
    handler: (s: ReservationHistoryOperationServices, ctx, input) => s.reservationHistory.receipts(ctx, input),
  }),
];
