import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Strict } from '../http/schemas.js';
import type { Db } from '../db/driver.js';
import type { TenantService } from '../tenants/service.js';
import { streamActivity } from './stream.js';

const Id = Type.String({ minLength: 1, maxLength: 200 });

/**
 * The realtime activity stream stays a plain route, outside the admin catalogue: it is a long-lived
 * server-sent-events response written to the raw socket, with no JSON body for a response schema to describe.
 */
export function conversationAdminRoutes({ tenants, db }: { tenants: TenantService; db: Db }) {
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
