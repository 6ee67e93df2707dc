import { Type } from 'typebox';
import { DateTime, Ref, Strict, StringEnum } from '../http/schemas.js';
import { EVENT_TYPES } from './events.js';

export const EventTypeSchema = StringEnum(EVENT_TYPES, { description: 'Event type' });
const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'Public https URL on port 443' });
const Events = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: EVENT_TYPES.length, uniqueItems: true });
const Description = Type.String({ maxLength: 500 });
const RateLimit = Type.Integer({ minimum: 1, maximum: 10_000, description: 'Deliveries per second at most; deliveries beyond it wait as pending' });
const FailureCode = StringEnum(['http_status', 'redirect', 'timeout', 'dns', 'connection', 'blocked_destination', 'tls']);

export const SubscriptionParams = Type.Object({ subscriptionId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);
export const DeliveryParams = Type.Object(
  { subscriptionId: Type.String({ minLength: 1, maxLength: 128 }), deliveryId: Type.String({ minLength: 1, maxLength: 128 }) },
  Strict,
);

export const CreateSubscriptionBody = Type.Object(
  {
    url: Url,
    events: Events,
    description: Type.Optional(Description),
    active: Type.Optional(Type.Boolean()),
    rateLimitPerSecond: Type.Optional(RateLimit),
  },
  Strict,
);

export const UpdateSubscriptionBody = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    active: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.Union([Description, Type.Null()], { description: 'null or empty string clears it' })),
    rateLimitPerSecond: Type.Optional(Type.Union([RateLimit, Type.Null()], { description: 'null removes the limit' })),
  },
  { ...Strict, minProperties: 1 },
);

export const Subscription = Type.Object(
  {
    subscriptionId: Type.String(),
    url: Type.String(),
    events: Type.Array(Type.String()),
    active: Type.Boolean(),
    disabledReason: Type.Optional(StringEnum(['failing'], { description: 'Why the service disabled it; cleared by enabling it again' })),
    description: Type.Optional(Type.String()),
    rateLimitPerSecond: Type.Optional(Type.Integer()),
    health: Type.Object(
      {
        consecutiveFailures: Type.Integer({ minimum: 0, description: 'Attempts failed since the last successful one' }),
        lastSuccessAt: Type.Optional(DateTime),
        lastFailureAt: Type.Optional(DateTime),
        lastFailureCode: Type.Optional(FailureCode),
      },
      { additionalProperties: false },
    ),
    ownerApiKeyId: Type.String(),
    createdAt: DateTime,
    updatedAt: DateTime,
    secret: Type.Optional(Type.String({ description: 'Only on creation and rotation' })),
  },
  { $id: 'WebhookSubscription', additionalProperties: false },
);

export const SubscriptionList = Type.Object({ subscriptions: Type.Array(Ref(Subscription)) }, { additionalProperties: false });

const DeliveryStatus = StringEnum(['pending', 'delivered', 'failed', 'canceled']);

export const Delivery = Type.Object(
  {
    deliveryId: Type.String(),
    eventId: Type.String(),
    eventType: Type.String(),
    subscriptionId: Type.String(),
    status: DeliveryStatus,
    attempts: Type.Integer({ minimum: 0, description: 'Attempts made, over every cycle' }),
    nextAttemptAt: Type.Optional(DateTime),
    httpStatus: Type.Optional(Type.Integer()),
    failureCode: Type.Optional(FailureCode),
    deliveredAt: Type.Optional(DateTime),
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { $id: 'WebhookDelivery', additionalProperties: false },
);

export const DeliveryEnvelope = Type.Object({ delivery: Ref(Delivery) }, { additionalProperties: false });

export const DeliveryListQuery = Type.Object(
  {
    status: Type.Optional(DeliveryStatus),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  },
  Strict,
);

export const DeliveryList = Type.Object(
  { deliveries: Type.Array(Ref(Delivery)), nextCursor: Type.Optional(Type.String()), hasMore: Type.Boolean() },
  { additionalProperties: false },
);

export const AttemptList = Type.Object(
  {
    attempts: Type.Array(
      Type.Object(
        {
          attemptedAt: DateTime,
          durationMs: Type.Integer(),
          httpStatus: Type.Optional(Type.Integer()),
          failureCode: Type.Optional(Type.String()),
          error: Type.Optional(Type.String()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const RecoverBody = Type.Object(
  { since: DateTime, until: Type.Optional(DateTime) },
  Strict,
);

export const RecoverResult = Type.Object({ recovered: Type.Integer({ minimum: 0, description: 'Failed deliveries restarted' }) }, { additionalProperties: false });

export const TestEventBody = Type.Object(
  { type: EventTypeSchema, data: Type.Record(Type.String({ maxLength: 64 }), Type.Unknown(), { maxProperties: 32 }) },
  Strict,
);

/** Schemas referenced by $id from responses; added once at the root (adding them in a child context would reset its validator). */
export const webhookSharedSchemas = [Subscription, Delivery];

/** A subscription as a response body (a reference to the shared schema). */
export const SubscriptionResponse = Ref(Subscription);
