import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { conversationAdminRoutes } from '../conversations/admin-routes.js';
import type { Db } from '../db/driver.js';
import { ADMIN_OPERATIONS, type CatalogueServices } from '../operations/catalogue.js';
import { OPENAPI_REFERENCES, selfContained } from '../operations/openapi.js';
import { registerOperations, type RouteServices } from '../operations/rest.js';

/** The name the admin document's generator is decorated under (`swagger` is the public one's). */
const ADMIN_SWAGGER = 'adminSwagger';

/**
 * The dashboard's backend and the way tests build their world: the catalogue's admin operations under
 * /admin/v1 (behind the admin token, checked by the caller's hook), and their OpenAPI document, generated from
 * the same routes by the same generator as the public one.
 */
export function adminRoutes(services: CatalogueServices & RouteServices & { db: Db }) {
  return async (app: FastifyInstance): Promise<void> => {
    // Registered inside this prefix, it sees only the routes registered here after it: the admin document.
    await app.register(swagger, {
      decorator: ADMIN_SWAGGER,
      openapi: {
        openapi: '3.1.0',
        info: { title: 'Admin API', version: '1.0.0', description: 'Provisioning and the outside world (inbound messages, PMS sync, CRM). Not part of the public API.' },
        servers: [{ url: '/admin/v1' }],
        components: { securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' } } },
        security: [{ adminToken: [] }],
      },
      refResolver: OPENAPI_REFERENCES,
    });
    registerOperations(app, services, ADMIN_OPERATIONS);
    await app.register(conversationAdminRoutes(services));
    let document: unknown;
    app.get('/openapi.json', { schema: { hide: true } }, async () => (document ??= selfContained(app.getDecorator<() => object>(ADMIN_SWAGGER)())));
  };
}
