import type { FastifyInstance } from 'fastify';
import { conversationAdminRoutes } from '../conversations/admin-routes.js';
import type { Services } from '../services.js';
import { ADMIN_OPERATIONS } from './catalogue.js';
import type { AdminServices } from './define.js';
import { adminDocument } from './openapi.js';
import { registerAdminOperations } from './rest.js';

/** The dashboard's backend and the way tests build their world: provisioning under /admin/v1. */
export function adminRoutes(services: AdminServices & Pick<Services, 'db'>) {
  return async (app: FastifyInstance): Promise<void> => {
    registerAdminOperations(app, services, ADMIN_OPERATIONS);
    await app.register(conversationAdminRoutes(services));
    let document: unknown;
    app.get('/openapi.json', { schema: { hide: true } }, async () => (document ??= adminDocument(ADMIN_OPERATIONS)));
  };
}
