import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Strict } from '../http/schemas.js';
import type { Services } from '../services.js';
import { streamActivity } from './stream.js';

const Id = Type.String({ minLength: 1, maxLength: 200 });

/** The body of admin `POST /tenants/{tenantId}/inbound-messages` (declared in admin-operations.ts). */
export const InboundMessageBody = Type.Object(
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
        );

/**
 * The realtime activity stream stays a plain route, outside the admin catalogue: it is a long-lived
 * server-sent-events response written to the raw socket, with no JSON body for a response schema to describe.
 */
export function conversationAdminRoutes({ tenants, db }: Pick<Services, 'tenants' | 'db'>) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();

    app.get('/tenants/:tenantId/conversations/stream', {
      schema: { hide: true, params: Type.Object({ tenantId: Id }, Strict) },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      await streamActivity(db, request.params.tenantId, request, reply);
    });
  };
}
