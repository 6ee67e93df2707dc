import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Strict } from '../http/schemas.js';
import type { Services } from '../services.js';
import { IntegrationBody, SyncBody } from './schema.js';

const Id = Type.String({ minLength: 1, maxLength: 200 });
const hide = { hide: true };

/** Admin: property-management integrations and the provider sync that pushes reservation mirrors. */
export function reservationAdminRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { reservations, tenants } = services;

    app.post('/tenants/:tenantId/integrations', {
      schema: { ...hide, params: Type.Object({ tenantId: Id }, Strict), body: IntegrationBody },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await reservations.createIntegration(request.params.tenantId, request.body));
    });

    app.put('/tenants/:tenantId/integrations/:integrationId/reservations/:providerReservationId', {
      schema: {
        ...hide,
        params: Type.Object({ tenantId: Id, integrationId: Id, providerReservationId: Type.String({ minLength: 1, maxLength: 500 }) }, Strict),
        body: SyncBody,
      },
    }, async (request, reply) => {
      const { tenantId, integrationId, providerReservationId } = request.params;
      await tenants.require(tenantId);
      const { created, mirror } = await reservations.sync(tenantId, integrationId, providerReservationId, request.body);
      return reply.status(created ? 201 : 200).send(mirror);
    });
  };
}
