import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Strict } from '../http/schemas.js';
import type { Services } from '../services.js';
import { ProviderStatusBody } from './schema.js';

const Id = Type.String({ minLength: 1, maxLength: 200 });

/** Admin: the provider callback simulator and contact creation (consent is recorded by the business). */
export function messagingAdminRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { messaging, inbox, tenants } = services;

    app.post('/tenants/:tenantId/message-requests/:requestEventId/provider-status', {
      schema: { hide: true, params: Type.Object({ tenantId: Id, requestEventId: Id }, Strict), body: ProviderStatusBody },
    }, async (request) => messaging.applyProviderStatus(request.params.tenantId, request.params.requestEventId, request.body.status, request.body.error));

    app.post('/tenants/:tenantId/contacts', {
      schema: {
        hide: true,
        params: Type.Object({ tenantId: Id }, Strict),
        body: Type.Object(
          {
            name: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
            phone: Type.Optional(Type.String({ minLength: 3, maxLength: 32 })),
            handle: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
            consent: Type.Optional(Type.Boolean()),
            optedOut: Type.Optional(Type.Boolean()),
          },
          Strict,
        ),
      },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await inbox.createContact(request.params.tenantId, request.body));
    });
  };
}
