import { Type } from 'typebox';
import { ALL_SCOPES } from '../auth/scopes.js';
import { SUPPORTED_LOCALES, TEMPLATE_STATUSES } from '../channels/service.js';
import { PROVIDERS } from '../channels/connection.js';
import { DateTime, nullable, Strict, StringEnum } from '../http/schemas.js';

/** Request and response shapes of the provisioning part of the admin API. Responses are closed objects. */
const closed = { additionalProperties: false } as const;

export const Id = Type.String({ minLength: 1, maxLength: 128 });
export const TenantParams = Type.Object({ tenantId: Id }, Strict);
const Name = Type.String({ minLength: 1, maxLength: 160 });
const TimeZone = Type.String({ minLength: 1, maxLength: 64 });
const ScopeList = Type.Array(StringEnum(ALL_SCOPES), { maxItems: ALL_SCOPES.length * 2 });

export const CreateTenantBody = Type.Object({ name: Name, timezone: Type.Optional(TimeZone) }, Strict);
export const Tenant = Type.Object({ tenantId: Type.String(), name: Type.String(), timezone: Type.String() }, closed);

export const SettingsBody = Type.Object(
  { timezone: Type.Optional(TimeZone), salesAvailable: Type.Optional(Type.Boolean()), salesPublished: Type.Optional(Type.Boolean()) },
  { ...Strict, minProperties: 1 },
);
export const TenantSettings = Type.Object({ timezone: Type.String(), salesAvailable: Type.Boolean(), salesPublished: Type.Boolean() }, closed);

export const CreateKeyBody = Type.Object({ name: Name, scopes: ScopeList, expiresAt: Type.Optional(DateTime) }, Strict);
export const KeyParams = Type.Object({ tenantId: Id, apiKeyId: Id }, Strict);
export const KeyScopesBody = Type.Object({ scopes: ScopeList }, Strict);
const keyFields = {
  apiKeyId: Type.String(),
  name: Type.String(),
  keyPrefix: Type.String(),
  scopes: Type.Array(Type.String()),
  expiresAt: nullable(DateTime),
  revokedAt: nullable(DateTime),
  createdAt: DateTime,
  updatedAt: DateTime,
};
export const ApiKey = Type.Object(keyFields, { ...closed, description: 'The key without its secret' });
export const CreatedApiKey = Type.Object({ ...keyFields, key: Type.String({ description: 'The secret, shown only here' }) }, closed);

export const CreateOperatorBody = Type.Object({ displayName: Name, email: Type.String({ format: 'email', maxLength: 320 }) }, Strict);
export const OperatorParams = Type.Object({ tenantId: Id, operatorId: Id }, Strict);
export const OperatorActiveBody = Type.Object({ active: Type.Boolean() }, Strict);
export const Operator = Type.Object({ operatorId: Type.String(), displayName: Type.String(), email: Type.String(), active: Type.Boolean() }, closed);

export const CreatePropertyBody = Type.Object({ name: Name }, Strict);
export const Property = Type.Object({ propertyId: Type.String(), name: Type.String(), createdAt: DateTime }, closed);

const Token = Type.String({ minLength: 1, maxLength: 4096 });
const GraphId = Type.String({ minLength: 1, maxLength: 64, pattern: '^[0-9]+$' });
/** Every provider's connection fields together; which ones a provider takes is checked by src/channels/connection.ts. */
const ConnectionBody = Type.Object(
  {
    phoneNumberId: Type.Optional(GraphId),
    wabaId: Type.Optional(GraphId),
    accessToken: Type.Optional(Token),
    pageId: Type.Optional(GraphId),
    pageAccessToken: Type.Optional(Token),
    instagramAccountId: Type.Optional(GraphId),
    allowedOrigins: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { minItems: 1, maxItems: 20 })),
  },
  { ...Strict, description: 'whatsapp_cloud {phoneNumberId, wabaId, accessToken?}; messenger {pageId, pageAccessToken}; instagram {instagramAccountId, accessToken}; webchat {allowedOrigins}' },
);

export const CreateChannelBody = Type.Object(
  {
    kind: StringEnum(['whatsapp', 'instagram', 'messenger', 'webchat']),
    provider: Type.Optional(StringEnum(PROVIDERS, { description: 'Fixed at creation; sandbox when omitted' })),
    connection: Type.Optional(ConnectionBody),
    name: Name,
    phoneNumber: Type.Optional(Type.String({ pattern: '^\\+[1-9][0-9]{6,14}$' })),
    available: Type.Optional(Type.Boolean()),
  },
  Strict,
);
export const ChannelParams = Type.Object({ tenantId: Id, channelId: Id }, Strict);
export const UpdateChannelBody = Type.Object(
  { name: Type.Optional(Name), available: Type.Optional(Type.Boolean()), connection: Type.Optional(ConnectionBody) },
  { ...Strict, minProperties: 1 },
);
export const Channel = Type.Object(
  {
    channelId: Type.String(),
    kind: Type.String(),
    provider: StringEnum(PROVIDERS),
    name: Type.String(),
    phoneNumber: nullable(Type.String()),
    available: Type.Boolean(),
    connection: Type.Object(
      {
        status: StringEnum(['connected', 'not_connected', 'failing']),
        phoneNumberId: Type.Optional(Type.String()),
        wabaId: Type.Optional(Type.String()),
        pageId: Type.Optional(Type.String()),
        instagramAccountId: Type.Optional(Type.String()),
        allowedOrigins: Type.Optional(Type.Array(Type.String())),
        lastInboundAt: Type.Optional(DateTime),
        lastOutboundAt: Type.Optional(DateTime),
        lastError: Type.Optional(Type.Object({ code: Type.String(), message: Type.String(), at: DateTime }, closed)),
      },
      { ...closed, description: 'Never carries a token' },
    ),
    widgetId: Type.Optional(Type.String({ description: 'webchat: the public id the widget names its channel by' })),
  },
  closed,
);

export const TemplateParams = Type.Object({ tenantId: Id, channelId: Id, templateName: Type.String({ minLength: 1, maxLength: 512, pattern: '^[a-z0-9_]+$' }) }, Strict);
export const TemplateBody = Type.Object(
  {
    category: Type.String({ minLength: 1, maxLength: 64 }),
    locales: Type.Array(Type.Object({ locale: StringEnum(SUPPORTED_LOCALES), status: StringEnum(TEMPLATE_STATUSES), ready: Type.Boolean() }, Strict), {
      maxItems: SUPPORTED_LOCALES.length,
    }),
  },
  Strict,
);

export const EmittedEvent = Type.Object({ eventId: Type.String(), deliveries: Type.Integer({ description: 'Deliveries queued for it' }) }, closed);
