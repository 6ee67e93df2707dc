import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Strict, StringEnum } from '../http/schemas.js';
import type { Services } from '../services.js';
import { streamActivity } from './stream.js';

const Id = Type.String({ minLength: 1, maxLength: 200 });
const OperatorRef = Type.String({ minLength: 1, maxLength: 120 });
const hide = { hide: true };

/** Admin routes that feed the inbox: inbound messages, contacts, ownership, handoffs, the realtime stream. */
export function conversationAdminRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { inbox, tenants, db } = services;

    app.post('/tenants/:tenantId/inbound-messages', {
      schema: {
        ...hide,
        params: Type.Object({ tenantId: Id }, Strict),
        body: Type.Object(
          {
            channelId: Type.String({ minLength: 1, maxLength: 120 }),
            contact: Type.Object(
              {
                name: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
                phone: Type.Optional(Type.String({ minLength: 3, maxLength: 32 })),
                handle: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
              },
              Strict,
            ),
            text: Type.String({ minLength: 1, maxLength: 4096 }),
            receivedAt: Type.Optional(Type.String({ format: 'date-time', description: 'Imports earlier history; not in the future' })),
          },
          Strict,
        ),
      },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await inbox.receiveInbound(request.params.tenantId, request.body));
    });

    app.patch('/tenants/:tenantId/contacts/:contactId', {
      schema: {
        ...hide,
        params: Type.Object({ tenantId: Id, contactId: Id }, Strict),
        body: Type.Object(
          {
            name: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 160 }), Type.Null()])),
            consent: Type.Optional(Type.Boolean()),
            optedOut: Type.Optional(Type.Boolean()),
          },
          { ...Strict, minProperties: 1 },
        ),
      },
    }, async (request) => inbox.updateContact(request.params.tenantId, request.params.contactId, request.body));

    app.patch('/tenants/:tenantId/conversations/:conversationId', {
      schema: {
        ...hide,
        params: Type.Object({ tenantId: Id, conversationId: Id }, Strict),
        body: Type.Object({ ownerOperatorId: Type.Union([OperatorRef, Type.Null()]) }, Strict),
      },
    }, async (request) => inbox.setOwner(request.params.tenantId, request.params.conversationId, request.body.ownerOperatorId));

    app.post('/tenants/:tenantId/conversations/:conversationId/handoff', {
      schema: {
        ...hide,
        params: Type.Object({ tenantId: Id, conversationId: Id }, Strict),
        body: Type.Object(
          {
            action: StringEnum(['open', 'assign', 'resolve']),
            operatorId: Type.Optional(Type.Union([OperatorRef, Type.Null()])),
          },
          Strict,
        ),
      },
    }, async (request) => inbox.handoff(request.params.tenantId, request.params.conversationId, request.body));

    app.get('/tenants/:tenantId/conversations/stream', {
      schema: { ...hide, params: Type.Object({ tenantId: Id }, Strict) },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      await streamActivity(db, request.params.tenantId, request, reply);
    });
  };
}
