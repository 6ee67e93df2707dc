import { Type } from 'typebox';
import { DateTime, Ref, Strict } from '../http/schemas.js';

export const EventEnvelope = Type.Object(
  {
    eventId: Type.String(),
    type: Type.String(),
    schemaVersion: Type.String(),
    tenantId: Type.String(),
    occurredAt: DateTime,
    data: Type.Record(Type.String(), Type.Unknown()),
  },
  { $id: 'EventEnvelope', additionalProperties: false },
);

export const EventListQuery = Type.Object(
  {
    types: Type.Optional(Type.String({ minLength: 1, maxLength: 1000, description: 'Comma-separated event types; omit for every type the key can read' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  },
  Strict,
);

export const EventParams = Type.Object({ eventId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

export const EventTypeList = Type.Object(
  {
    eventTypes: Type.Array(
      Type.Object(
        {
          type: Type.String(),
          description: Type.String(),
          requiredScope: Type.String(),
          schemaVersion: Type.String(),
          schema: Type.Record(Type.String(), Type.Unknown(), { description: 'JSON Schema of the event data' }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const EventList = Type.Object(
  {
    events: Type.Array(Ref(EventEnvelope)),
    nextCursor: Type.String({ description: 'Always present: keep it and follow it later for newer events' }),
    hasMore: Type.Boolean(),
  },
  { additionalProperties: false },
);

export const EventResponse = Type.Object({ event: Ref(EventEnvelope) }, { additionalProperties: false });

export const eventSharedSchemas = [EventEnvelope];
