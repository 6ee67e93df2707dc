import { timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyBaseLogger, type RawServerDefault } from 'fastify';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { DomainError, errorBody } from './errors.js';
import { clientErrorHandler, requestIdOf, sendError } from './http/edge-errors.js';
import { applyRouteLimits, inputGuardHook } from './http/input-guard.js';
import { rootRoute } from './http/root-route.js';
import { BodyRate, closeIfBodyIgnored, closeIfBodyUnread, registerBodyRate } from './http/body-rate.js';
import { registerJsonParser } from './http/json-body.js';
import { applyServerLimits, SERVER_LIMITS } from './http/server-limits.js';
import { authenticateHook } from './http/auth.js';
import type { KeyRateLimit } from './http/rate-limit.js';
import type { Metrics } from './metrics/prometheus.js';
import { lazyChild } from './util/lazy-logger.js';
import { validatorCompiler } from './http/validation.js';
import { lazySerializers } from './http/serialization.js';
import { adminRoutes } from './admin/routes.js';
import { metaCallbackRoutes } from './channels/callback-routes.js';
import { webchatRoutes } from './channels/webchat/routes.js';
import { shareRoutes } from './knowledge/share-routes.js';
import { migrationsApplied } from './db/migrate.js';
import { docsRoutes } from './docs/routes.js';
import { OPERATIONS } from './operations/catalogue.js';
import { hideAdminRoutes, OPENAPI_REFERENCES, publicDocument } from './operations/openapi.js';
import { registerOperations } from './operations/rest.js';
import { SHARED_SCHEMAS } from './operations/shared-schemas.js';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from './db/unavailable.js';
import type { Services } from './services.js';

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

const API_PREFIX = '/m2m/v1';

function tokenMatches(given: string | undefined, expected: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(`Bearer ${expected}`);
  return a.length === b.length && timingSafeEqual(a, b);
}

export interface AppOptions {
  /** The per-key rate limit (per process, or shared through Redis). */
  limiter: KeyRateLimit;
  /** Set when METRICS_PORT is: every request is recorded. */
  metrics?: Metrics;
}

export async function buildApp(services: Services, logger: Logger, options: AppOptions): Promise<App> {
  const { config } = services;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    childLoggerFactory: (parent, bindings, options) => lazyChild(parent, bindings, options),
    bodyLimit: 1024 * 1024,
    requestTimeout: SERVER_LIMITS.requestTimeoutMs,
    genReqId: (req) => requestIdOf(req.headers['x-request-id']),
    // Router and HTTP-parser refusals answer the error envelope too (src/http/edge-errors.ts).
    frameworkErrors: sendError,
    clientErrorHandler,
    // Path values the schemas allow (conversationId up to 200, template names up to 512) must reach
    // validation; Fastify's default maxParamLength (100) answers longer ones with a bare 414.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 2048 },
    schemaController: { compilersFactory: { buildSerializer: lazySerializers() } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  applyServerLimits(app.server);
  options.metrics?.instrument(app);
  // JSON only: anything else is 415 rather than a string body that fails validation confusingly.
  app.removeContentTypeParser('text/plain');
  registerJsonParser(app);
  registerBodyRate(app, new BodyRate(config.bodyBytesPerSecond));
  app.setValidatorCompiler(validatorCompiler());
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  // Callback-style hooks (not async): they run on every request, which then makes no promise per hook.
  app.addHook('onRoute', applyRouteLimits);
  app.addHook('onRequest', (request, reply, done) => {
    // On the raw response, so that hijacked replies (MCP) carry it too.
    reply.raw.setHeader('X-Request-Id', request.id);
    closeIfBodyIgnored(request, reply);
    done();
  });

  // A POST/PUT/PATCH without a body is validated as {}: optional-body routes accept it, and routes with
  // required fields say which are missing instead of "body must be object".
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined && (request.method === 'POST' || request.method === 'PUT' || request.method === 'PATCH')) request.body = {};
    done();
  });
  app.addHook('preValidation', inputGuardHook);

  app.setErrorHandler((error: FastifyError, request, reply) => sendError(error, request, reply));
  app.setNotFoundHandler((request, reply) => {
    closeIfBodyUnread(request, reply);
    void reply.status(404).send(errorBody('M2M_NOT_FOUND', `no route for ${request.method} ${request.url.split('?')[0]}`));
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Tenant-scoped messaging, knowledge and webhook API', version: '1.0.0' },
      servers: [{ url: API_PREFIX }],
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'Tenant-scoped API key' } } },
      security: [{ bearerAuth: [] }],
    },
    refResolver: OPENAPI_REFERENCES,
    transform: hideAdminRoutes,
  });

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (request, reply) => {
    try {
      if (await migrationsApplied(services.db)) return { status: 'ready' };
    } catch {
      // reported below
    }
    return reply
      .status(503)
      .header('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS)
      .send(errorBody('M2M_UNAVAILABLE', 'database unreachable or migrations pending', { retryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS, requestId: request.id }));
  });

  let openapi: unknown;
  app.get(`${API_PREFIX}/openapi.json`, { schema: { hide: true } }, async () => {
    openapi ??= publicDocument(app.swagger(), OPERATIONS);
    return openapi;
  });

  await app.register(docsRoutes(API_PREFIX));
  await app.register(rootRoute(API_PREFIX));

  const { limiter } = options;
  await app.register(
    async (api) => {
      api.addHook('onRequest', authenticateHook(services.apiKeys, limiter));
      registerOperations(api, services, OPERATIONS);
      // The MCP SDK is large: it is loaded only where MCP is enabled.
      if (config.mcpEnabled) await api.register((await import('./mcp/routes.js')).mcpRoutes(services));
    },
    { prefix: API_PREFIX },
  );

  await app.register(metaCallbackRoutes(config, services.db, services.clock));
  await app.register(shareRoutes(services.knowledgeAssets));
  await app.register(webchatRoutes(services.webchat));

  await app.register(
    async (admin) => {
      admin.addHook('onRequest', async (request) => {
        if (!config.adminToken) throw new DomainError('M2M_NOT_FOUND', 'not found');
        if (!tokenMatches(request.headers.authorization, config.adminToken)) {
          throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'admin token missing or wrong');
        }
      });
      await admin.register(adminRoutes(services));
    },
    { prefix: '/admin/v1' },
  );

  return app;
}
