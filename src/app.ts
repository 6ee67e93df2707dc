import { timingSafeEqual } from 'node:crypto';
import { pooledRandomBytes } from './ids.js';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyBaseLogger, type RawServerDefault } from 'fastify';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { DomainError, errorBody, statusOf, type ErrorCode, type Issue } from './errors.js';
import { authenticateHook } from './http/auth.js';
import { RateLimiter } from './http/rate-limit.js';
import { lazyChild } from './util/lazy-logger.js';
import { validatorCompiler } from './http/validation.js';
import { adminRoutes } from './admin/routes.js';
import { whatsappCallbackRoutes } from './messaging/provider-routes.js';
import { shareRoutes } from './knowledge/share-routes.js';
import { migrationsApplied } from './db/migrate.js';
import { docsRoutes } from './docs/routes.js';
import { OPERATIONS } from './operations/catalogue.js';
import { publicDocument } from './operations/openapi.js';
import { registerOperations } from './operations/rest.js';
import { SHARED_SCHEMAS } from './operations/shared-schemas.js';
import type { Services } from './services.js';

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

const API_PREFIX = '/m2m/v1';
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function issuesOf(error: FastifyError): Issue[] {
  const where = error.validationContext === 'querystring' ? 'query' : (error.validationContext ?? 'body');
  return (error.validation ?? []).map((v) => {
    const base = `${where}${v.instancePath.replace(/\//g, '.')}`;
    const params = v.params as Record<string, unknown>;
    if (typeof params.additionalProperty === 'string') return { path: `${base}.${params.additionalProperty}`, message: 'unknown property' };
    if (typeof params.missingProperty === 'string') return { path: `${base}.${params.missingProperty}`, message: 'is required' };
    if (Array.isArray(params.allowedValues)) return { path: base, message: `must be one of ${params.allowedValues.join(', ')}` };
    return { path: base, message: v.message ?? 'is invalid' };
  });
}

/** Maps anything thrown to the spec's error envelope; 5xx details are logged, never sent. */
function toErrorResponse(error: FastifyError | DomainError | Error, requestId: string): { status: number; code: ErrorCode; message: string; details: Record<string, unknown> } {
  if (error instanceof DomainError) return { status: statusOf[error.code], code: error.code, message: error.message, details: error.details };
  const fe = error as FastifyError;
  if (fe.validation) {
    const issues = issuesOf(fe);
    return { status: 400, code: 'M2M_INVALID_REQUEST', message: issues.map((i) => `${i.path}: ${i.message}`).join('; '), details: { issues } };
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, code: 'M2M_PAYLOAD_TOO_LARGE', message: 'request body is too large', details: {} };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 415, code: 'M2M_UNSUPPORTED_MEDIA_TYPE', message: 'send request bodies as application/json', details: {} };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, code: 'M2M_INVALID_REQUEST', message: 'body must not be empty when Content-Type is application/json', details: { issues: [{ path: 'body', message: 'is empty' }] } };
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    const message = fe instanceof SyntaxError || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ? 'body is not valid JSON' : 'invalid request';
    return { status: 400, code: 'M2M_INVALID_REQUEST', message, details: { issues: [{ path: 'body', message }] } };
  }
  return { status: 500, code: 'M2M_INTERNAL_ERROR', message: 'internal error', details: { requestId } };
}

function tokenMatches(given: string | undefined, expected: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(`Bearer ${expected}`);
  return a.length === b.length && timingSafeEqual(a, b);
}

export async function buildApp(services: Services, logger: Logger): Promise<App> {
  const { config } = services;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    childLoggerFactory: (parent, bindings, options) => lazyChild(parent, bindings, options),
    bodyLimit: 1024 * 1024,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : `req_${pooledRandomBytes(9).toString('base64url')}`;
    },
    // Path values the schemas allow (conversationId up to 200, template names up to 512) must reach
    // validation; Fastify's default maxParamLength (100) answers longer ones with a bare 414.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 2048 },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // JSON only: anything else is 415 rather than a string body that fails validation confusingly.
  app.removeContentTypeParser('text/plain');
  app.setValidatorCompiler(validatorCompiler());
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  // Callback-style hooks (not async): they run on every request, and a promise per hook is measurable.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id);
    done();
  });

  // A POST/PUT/PATCH without a body is validated as {}: optional-body routes accept it, and routes with
  // required fields say which are missing instead of "body must be object".
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined && (request.method === 'POST' || request.method === 'PUT' || request.method === 'PATCH')) request.body = {};
    done();
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const response = toErrorResponse(error, request.id);
    if (response.status >= 500) request.log.error({ err: error }, 'request failed');
    else request.log.info({ code: response.code, status: response.status }, response.message);
    void reply.status(response.status).send(errorBody(response.code, response.message, response.details));
  });
  app.setNotFoundHandler((request, reply) => {
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
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    try {
      if (await migrationsApplied(services.db)) return { status: 'ready' };
    } catch {
      // reported below
    }
    return reply.status(503).send(errorBody('M2M_INTERNAL_ERROR', 'database unreachable or migrations pending'));
  });

  let openapi: unknown;
  app.get(`${API_PREFIX}/openapi.json`, { schema: { hide: true } }, async () => {
    openapi ??= publicDocument(app.swagger(), OPERATIONS);
    return openapi;
  });

  await app.register(docsRoutes(API_PREFIX));

  const limiter = new RateLimiter(config.rateLimitRps, config.rateLimitBurst);
  await app.register(
    async (api) => {
      api.addHook('onRequest', authenticateHook(services.apiKeys, limiter));
      registerOperations(api, services, OPERATIONS);
      // The MCP SDK (~25 MB of RSS) is loaded only where MCP is enabled.
      if (config.mcpEnabled) await api.register((await import('./mcp/routes.js')).mcpRoutes(services));
    },
    { prefix: API_PREFIX },
  );

  await app.register(whatsappCallbackRoutes(config, services.messaging));
  await app.register(shareRoutes(services.knowledgeAssets));

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
