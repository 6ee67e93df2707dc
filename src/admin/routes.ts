import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ALL_SCOPES } from '../auth/scopes.js';
import { SUPPORTED_LOCALES, TEMPLATE_STATUSES } from '../channels/service.js';
import { DateTime, Strict, StringEnum } from '../http/schemas.js';
import type { Services } from '../services.js';
import { TestEventBody } from '../webhooks/schema.js';
import { conversationAdminRoutes } from '../conversations/admin-routes.js';
import { messagingAdminRoutes } from '../messaging/admin-routes.js';
import { crmAdminRoutes } from '../crm/admin-routes.js';
import { knowledgeAdminRoutes } from '../knowledge/admin-routes.js';
import { reservationAdminRoutes } from '../reservations/admin-routes.js';

const Id = Type.String({ minLength: 1, maxLength: 128 });
const TenantParams = Type.Object({ tenantId: Id }, Strict);
const Name = Type.String({ minLength: 1, maxLength: 160 });

/** The dashboard's backend and the way tests build their world: provisioning under /admin/v1. */
export function adminRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { tenants, apiKeys, channels, webhooks } = services;
    const hide = { hide: true };
    await app.register(conversationAdminRoutes(services));
    await app.register(messagingAdminRoutes(services));
    await app.register(crmAdminRoutes(services));
    await app.register(knowledgeAdminRoutes(services));
    await app.register(reservationAdminRoutes(services));

    app.post('/tenants', {
      schema: { ...hide, body: Type.Object({ name: Name, timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })) }, Strict) },
    }, async (request, reply) => reply.status(201).send(await tenants.create(request.body)));

    app.patch('/tenants/:tenantId/settings', {
      schema: {
        ...hide,
        params: TenantParams,
        body: Type.Object(
          {
            timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
            salesAvailable: Type.Optional(Type.Boolean()),
            salesPublished: Type.Optional(Type.Boolean()),
          },
          { ...Strict, minProperties: 1 },
        ),
      },
    }, async (request) => tenants.updateSettings(request.params.tenantId, request.body));

    app.post('/tenants/:tenantId/api-keys', {
      schema: {
        ...hide,
        params: TenantParams,
        body: Type.Object(
          {
            name: Name,
            scopes: Type.Array(StringEnum(ALL_SCOPES), { maxItems: ALL_SCOPES.length * 2 }),
            expiresAt: Type.Optional(DateTime),
          },
          Strict,
        ),
      },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await apiKeys.create(request.params.tenantId, request.body));
    });

    const KeyParams = Type.Object({ tenantId: Id, apiKeyId: Id }, Strict);
    app.patch('/tenants/:tenantId/api-keys/:apiKeyId', {
      schema: {
        ...hide,
        params: KeyParams,
        body: Type.Object({ scopes: Type.Array(StringEnum(ALL_SCOPES), { maxItems: ALL_SCOPES.length * 2 }) }, Strict),
      },
    }, async (request) => apiKeys.updateScopes(request.params.tenantId, request.params.apiKeyId, request.body.scopes));

    app.post('/tenants/:tenantId/api-keys/:apiKeyId/revoke', { schema: { ...hide, params: KeyParams } }, async (request) =>
      apiKeys.revoke(request.params.tenantId, request.params.apiKeyId),
    );

    app.post('/tenants/:tenantId/operators', {
      schema: {
        ...hide,
        params: TenantParams,
        body: Type.Object({ displayName: Name, email: Type.String({ format: 'email', maxLength: 320 }) }, Strict),
      },
    }, async (request, reply) => reply.status(201).send(await tenants.createOperator(request.params.tenantId, request.body)));

    app.patch('/tenants/:tenantId/operators/:operatorId', {
      schema: {
        ...hide,
        params: Type.Object({ tenantId: Id, operatorId: Id }, Strict),
        body: Type.Object({ active: Type.Boolean() }, Strict),
      },
    }, async (request) => tenants.setOperatorActive(request.params.tenantId, request.params.operatorId, request.body.active));

    app.post('/tenants/:tenantId/properties', {
      schema: { ...hide, params: TenantParams, body: Type.Object({ name: Name }, Strict) },
    }, async (request, reply) => reply.status(201).send(await tenants.createProperty(request.params.tenantId, request.body)));

    app.post('/tenants/:tenantId/channels', {
      schema: {
        ...hide,
        params: TenantParams,
        body: Type.Object(
          {
            kind: StringEnum(['whatsapp', 'instagram', 'messenger', 'webchat']),
            name: Name,
            phoneNumber: Type.Optional(Type.String({ pattern: '^\\+[1-9][0-9]{6,14}$' })),
            providerRef: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'WhatsApp Cloud API phone-number id' })),
            available: Type.Optional(Type.Boolean()),
          },
          Strict,
        ),
      },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await channels.create(request.params.tenantId, request.body));
    });

    app.put('/tenants/:tenantId/channels/:channelId/templates/:templateName', {
      schema: {
        ...hide,
        params: Type.Object({ tenantId: Id, channelId: Id, templateName: Type.String({ minLength: 1, maxLength: 512, pattern: '^[a-z0-9_]+$' }) }, Strict),
        body: Type.Object(
          {
            category: Type.String({ minLength: 1, maxLength: 64 }),
            locales: Type.Array(
              Type.Object(
                {
                  locale: StringEnum(SUPPORTED_LOCALES),
                  status: StringEnum(TEMPLATE_STATUSES),
                  ready: Type.Boolean(),
                },
                Strict,
              ),
              { maxItems: SUPPORTED_LOCALES.length },
            ),
          },
          Strict,
        ),
      },
    }, async (request) =>
      channels.putTemplate(request.params.tenantId, request.params.channelId, request.params.templateName, request.body),
    );

    /** Emits a synthetic event through the real outbox (a dashboard "send test event", and how tests drive deliveries). */
    app.post('/tenants/:tenantId/webhook-events', {
      schema: { ...hide, params: TenantParams, body: TestEventBody },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await webhooks.emitTestEvent(request.params.tenantId, request.body.type, request.body.data));
    });
  };
}
