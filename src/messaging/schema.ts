import { Type } from 'typebox';
import { DateTime, Strict, StringEnum } from '../http/schemas.js';
import { SUPPORTED_LOCALES } from '../channels/service.js';

export const Locale = StringEnum(SUPPORTED_LOCALES);

export const TemplateStatusQuery = Type.Object({ channelId: Type.String({ minLength: 1, maxLength: 120 }) }, Strict);

export const TemplateReadiness = Type.Object(
  {
    channelId: Type.String(),
    templateName: Type.Optional(Type.String()),
    category: Type.Optional(Type.String()),
    locales: Type.Array(
      Type.Object(
        { locale: Type.String(), status: Type.String(), ready: Type.Boolean(), lastFetchedAt: Type.Optional(DateTime) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const StartBody = Type.Object(
  {
    channelId: Type.String({ minLength: 1, maxLength: 120 }),
    recipientPhone: Type.String({ pattern: '^\\+[1-9][0-9]{6,14}$', description: 'E.164, e.g. +525512345678' }),
    locale: Locale,
    messageText: Type.String({ minLength: 1, maxLength: 1024 }),
    contactName: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
  },
  Strict,
);

export const StartAccepted = Type.Object(
  { conversationId: Type.String(), replyId: Type.String(), requestEventId: Type.String() },
  { additionalProperties: false, description: 'Queued, not delivered' },
);

export const RequestParams = Type.Object({ requestEventId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

/** A message request's delivery status. */
export const StatusEnum = StringEnum(['queued', 'sent', 'delivered', 'read', 'failed']);

export const RequestStatusRecord = Type.Object(
  {
    requestEventId: Type.String(),
    status: StatusEnum,
    conversationId: Type.String(),
    replyId: Type.String(),
    channel: Type.String(),
    createdAt: DateTime,
    updatedAt: DateTime,
    error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() }, { additionalProperties: false })),
    reconciled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const ProviderStatusBody = Type.Object(
  {
    status: StringEnum(['sent', 'delivered', 'read', 'failed']),
    error: Type.Optional(Type.Object({ code: Type.String({ minLength: 1, maxLength: 64 }), message: Type.String({ minLength: 1, maxLength: 500 }) }, Strict)),
  },
  Strict,
);
