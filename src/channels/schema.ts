import { Type } from 'typebox';
import { DateTime, Ref, Strict, StringEnum } from '../http/schemas.js';

export const CHANNEL_KINDS = ['whatsapp', 'instagram', 'messenger', 'webchat'] as const;
export const CHANNEL_PROVIDERS = ['sandbox', 'whatsapp_cloud', 'messenger', 'instagram', 'webchat'] as const;
export const CONNECTION_STATUSES = ['connected', 'not_connected', 'failing'] as const;

export const ChannelParams = Type.Object({ channelId: Type.String({ minLength: 1, maxLength: 120 }) }, Strict);

export const Channel = Type.Object(
  {
    channelId: Type.String(),
    kind: StringEnum(CHANNEL_KINDS),
    provider: StringEnum(CHANNEL_PROVIDERS),
    name: Type.String(),
    phoneNumber: Type.Optional(Type.String()),
    available: Type.Boolean(),
    connection: Type.Object(
      {
        status: StringEnum(CONNECTION_STATUSES),
        lastInboundAt: Type.Optional(DateTime),
        lastOutboundAt: Type.Optional(DateTime),
        lastError: Type.Optional(Type.Object({ code: Type.String(), message: Type.String(), at: DateTime }, { additionalProperties: false })),
      },
      { additionalProperties: false },
    ),
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { $id: 'Channel', additionalProperties: false },
);

export const ChannelList = Type.Object({ channels: Type.Array(Ref(Channel)) }, { additionalProperties: false });
export const ChannelEnvelope = Type.Object({ channel: Ref(Channel) }, { additionalProperties: false });

const TemplateLocale = Type.Object(
  { locale: Type.String(), status: Type.String(), ready: Type.Boolean(), lastFetchedAt: DateTime },
  { additionalProperties: false },
);

export const ChannelTemplates = Type.Object(
  {
    templates: Type.Array(
      Type.Object({ templateName: Type.String(), category: Type.String(), locales: Type.Array(TemplateLocale) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);

export const channelSharedSchemas = [Channel];
