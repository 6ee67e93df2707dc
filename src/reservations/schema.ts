import { Type } from 'typebox';
import { DateTime, Strict, StringEnum, nullable } from '../http/schemas.js';
import { ATTEMPT_RESULTS, LIFECYCLE_EVENTS } from './lifecycle-types.js';

/** The fixed page of 20 records: an integer in the document (Type.Literal would say number). */
const PageSize = Type.Unsafe<20>({ type: 'integer', const: 20 });

export const SORT_BY = ['check_in_date', 'booked_at'] as const;
export const SORT_DIR = ['asc', 'desc'] as const;

const CalendarDate = Type.String({ format: 'date', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', description: 'Calendar date YYYY-MM-DD' });
const IntegrationId = Type.String({ minLength: 1, maxLength: 160 });
const ChannelId = Type.String({ minLength: 1, maxLength: 120 });

/** The spec's four maxima (160, 500, 160, 64) with the cursor raised to the project-wide 400 (docs/decisions.md). */
export const ListReservationsQuery = Type.Object(
  {
    integrationId: Type.Optional(IntegrationId),
    reservationId: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'A provider reservation id (exact match)' })),
    status: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: 'nextCursor of the previous page; keep filters and sorting' })),
    sortBy: Type.Optional(StringEnum(SORT_BY, { default: 'check_in_date' })),
    sortDir: Type.Optional(StringEnum(SORT_DIR, { default: 'asc' })),
  },
  Strict,
);

export const Attempt = Type.Object(
  {
    createdAt: DateTime,
    lifecycleEventType: StringEnum(LIFECYCLE_EVENTS),
    result: StringEnum(ATTEMPT_RESULTS),
    reason: Type.String(),
    attemptCount: Type.Integer(),
    duplicateCount: Type.Integer(),
    triggerSource: Type.String({ description: 'sync_transition or schedule' }),
    senderPhoneNumber: Type.Optional(Type.String()),
    senderLabel: Type.Optional(Type.String()),
    conversationId: Type.Optional(Type.String()),
    conversationLink: Type.Optional(Type.String()),
    requestEventId: Type.Optional(Type.String({ description: 'Extension: the queued send of a would_send attempt' })),
  },
  { additionalProperties: false, description: 'A diagnostic, not a delivery receipt' },
);

const linkedFields = {
  provider: Type.String(),
  integrationId: Type.String(),
  providerReservationId: Type.String(),
  status: Type.String(),
  lastSyncedAt: DateTime,
  updatedAt: DateTime,
  integrationName: Type.String(),
  propertyId: Type.Optional(Type.String()),
  propertyName: Type.Optional(Type.String()),
  checkInDate: CalendarDate,
  checkOutDate: CalendarDate,
  bookedAt: DateTime,
  guestFullName: Type.String(),
  guestPhone: Type.Optional(Type.String({ description: 'As the provider sent it' })),
};

export const LinkedReservation = Type.Object(linkedFields, { additionalProperties: false });

export const Mirror = Type.Object(
  {
    ...linkedFields,
    sourceUpdatedAt: Type.Optional(DateTime),
    sourceFreshnessAt: DateTime,
    guestEmail: Type.Optional(Type.String()),
    guestPhoneNormalized: Type.Optional(Type.String({ description: 'Extension: E.164 form of guestPhone, absent when it is not a valid number' })),
    attemptsCount: Type.Integer(),
    attempts: Type.Array(Attempt, { maxItems: 20, description: 'The latest 20 attempts, newest first' }),
  },
  { additionalProperties: false, description: 'A mirrored provider record, not live availability' },
);

export const ReservationList = Type.Object(
  {
    mirrors: Type.Array(Mirror, { maxItems: 20 }),
    filters: Type.Object(
      {
        integrations: Type.Array(
          Type.Object({ provider: Type.String(), integrationId: Type.String(), integrationName: Type.String() }, { additionalProperties: false }),
        ),
      },
      { additionalProperties: false },
    ),
    availableStatuses: Type.Array(Type.String()),
    availableSorts: Type.Array(
      Type.Object({ sortBy: StringEnum(SORT_BY), sortDir: StringEnum(SORT_DIR), label: Type.String() }, { additionalProperties: false }),
    ),
    pageSize: PageSize,
    hasNext: Type.Boolean(),
    nextCursor: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

export const ConversationReservations = Type.Object(
  {
    conversationId: Type.String(),
    reservations: Type.Array(LinkedReservation, { maxItems: 5 }),
    totalCount: Type.Integer(),
    matchPhoneNormalized: Type.Optional(Type.String({ description: 'Absent when the contact has no phone' })),
  },
  { additionalProperties: false },
);

export const IntegrationSettings = Type.Object(
  {
    integrationId: Type.String(),
    integrationName: Type.String(),
    provider: Type.String(),
    events: Type.Array(
      Type.Object({ eventType: StringEnum(LIFECYCLE_EVENTS), enabled: Type.Boolean(), channelId: nullable(Type.String()) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);

export const LifecycleSettings = Type.Object(
  {
    integrations: Type.Array(IntegrationSettings),
    senders: Type.Array(
      Type.Object({ channelId: Type.String(), name: Type.String(), phoneNumber: nullable(Type.String()) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);

export const LifecycleSettingsParams = Type.Object({ integrationId: IntegrationId }, Strict);

export const LifecycleSettingBody = Type.Object(
  {
    eventType: StringEnum(LIFECYCLE_EVENTS),
    enabled: Type.Boolean(),
    channelId: Type.Optional(nullable(ChannelId)),
  },
  Strict,
);

/** Admin: a provider sync of one reservation (a full replacement of the mirrored fields). */
export const SyncBody = Type.Object(
  {
    status: Type.String({ minLength: 1, maxLength: 160 }),
    propertyId: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 128 }))),
    checkInDate: CalendarDate,
    checkOutDate: CalendarDate,
    bookedAt: DateTime,
    guestFullName: Type.String({ minLength: 1, maxLength: 200 }),
    guestEmail: Type.Optional(nullable(Type.String({ maxLength: 320 }))),
    guestPhone: Type.Optional(nullable(Type.String({ maxLength: 64 }))),
    sourceUpdatedAt: Type.Optional(DateTime),
  },
  Strict,
);

export const IntegrationBody = Type.Object({ provider: StringEnum(['pms']), name: Type.String({ minLength: 1, maxLength: 160 }) }, Strict);

const PageCursor = Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: 'nextCursor of the previous page; keep the filters' }));

export const AttemptsParams = Type.Object(
  { integrationId: IntegrationId, providerReservationId: Type.String({ minLength: 1, maxLength: 500 }) },
  Strict,
);
export const AttemptsQuery = Type.Object({ cursor: PageCursor }, Strict);

export const AttemptList = Type.Object(
  { attempts: Type.Array(Attempt, { maxItems: 20 }), pageSize: PageSize, hasNext: Type.Boolean(), nextCursor: Type.Optional(Type.String()) },
  { additionalProperties: false },
);

export const ReceiptsQuery = Type.Object(
  { integrationId: Type.Optional(IntegrationId), eventType: Type.Optional(StringEnum(LIFECYCLE_EVENTS)), cursor: PageCursor },
  Strict,
);

export const ReceiptList = Type.Object(
  {
    receipts: Type.Array(
      Type.Object(
        {
          integrationId: Type.String(),
          providerReservationId: Type.String(),
          lifecycleEventType: StringEnum(LIFECYCLE_EVENTS),
          conversationId: Type.String(),
          requestEventId: Type.String(),
          status: StringEnum(['queued', 'sent', 'delivered', 'read', 'failed'], { description: 'The message request status; not proof of delivery until delivered' }),
          createdAt: DateTime,
        },
        { additionalProperties: false },
      ),
      { maxItems: 20 },
    ),
    pageSize: PageSize,
    hasNext: Type.Boolean(),
    nextCursor: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
