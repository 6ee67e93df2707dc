import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Strict } from '../http/schemas.js';
import type { Services } from '../services.js';

const Id = Type.String({ minLength: 1, maxLength: 200 });
const Text = Type.String({ minLength: 1, maxLength: 160 });

/** Admin: leads and opportunities, as the sales CRM writes them. */
export function crmAdminRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { crm, tenants } = services;
    const TenantParams = Type.Object({ tenantId: Id }, Strict);

    app.post('/tenants/:tenantId/leads', {
      schema: { hide: true, params: TenantParams, body: Type.Object({ name: Text, phone: Type.Optional(Type.String({ minLength: 3, maxLength: 32 })), conversationId: Type.Optional(Id) }, Strict) },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await crm.createLead(request.params.tenantId, request.body));
    });

    app.post('/tenants/:tenantId/opportunities', {
      schema: { hide: true, params: TenantParams, body: Type.Object({ leadId: Id, stage: Text, status: Text, conversationId: Type.Optional(Id) }, Strict) },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await crm.createOpportunity(request.params.tenantId, request.body));
    });

    app.patch('/tenants/:tenantId/opportunities/:opportunityId', {
      schema: {
        hide: true,
        params: Type.Object({ tenantId: Id, opportunityId: Id }, Strict),
        body: Type.Object({ stage: Type.Optional(Text), status: Type.Optional(Text) }, { ...Strict, minProperties: 1 }),
      },
    }, async (request) => crm.updateOpportunity(request.params.tenantId, request.params.opportunityId, request.body));
  };
}
