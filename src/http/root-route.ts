import type { FastifyInstance } from 'fastify';

/**
 * `GET /`: whoever opens the server's address (a browser, a curl without a path) learns where the reference
 * and the machine-readable contract are, instead of a 404. No authentication: it names only public paths.
 * Anything else at the root keeps the app's 404 error envelope.
 */
export function rootRoute(apiPrefix: string) {
  const body = {
    name: 'Tenant-scoped messaging, knowledge and webhook API',
    api: apiPrefix,
    docs: `${apiPrefix}/docs`,
    openapi: `${apiPrefix}/openapi.json`,
    health: '/healthz',
    readiness: '/readyz',
    authentication: `Authorization: Bearer <API key> on every ${apiPrefix} call (npx m2m dev prints a demo key)`,
  };
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/', { schema: { hide: true } }, async () => body);
  };
}
