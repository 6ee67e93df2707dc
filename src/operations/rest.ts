import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ValidateFunction } from 'ajv';
import { Type, type TObject, type TSchema } from 'typebox';
import { keyCtx } from '../auth/context.js';
import { adminCtx } from '../context.js';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import { buildAjv } from '../http/validation.js';
import { IDEMPOTENCY_KEY_LENGTH } from '../platform/idempotency.js';
import { JsonText } from '../platform/json-text.js';
import { BinaryBody, WithStatus, type AdminOperation, type CatalogueOperation, type Operation } from './define.js';
import { executeOperation, type ExecuteServices } from './execute.js';
import { dereference } from './shared-schemas.js';

const IdempotencyKeyValue = Type.String({ ...IDEMPOTENCY_KEY_LENGTH, description: 'Stable per logical request; a retry with the same key and body replays the first answer' });

/** What the routes need besides each operation's own services: Idempotency-Key, and the admin routes' tenant check. */
export interface RouteServices extends ExecuteServices {
  tenants: { require(tenantId: string): Promise<unknown> };
}

/** `/webhooks/{subscriptionId}` → `/webhooks/:subscriptionId` */
function fastifyPath(path: string): string {
  return path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1');
}

function hasProperties(schema: TObject): boolean {
  return Object.keys(schema.properties).length > 0;
}

function idempotencyHeaders(operation: Operation): TSchema | undefined {
  if (!operation.idempotency) return undefined;
  const value = operation.idempotency.key === 'required' ? IdempotencyKeyValue : Type.Optional(IdempotencyKeyValue);
  return Type.Object({ 'idempotency-key': value });
}

function publicRouteSchema(operation: Operation): Record<string, unknown> {
  return {
    operationId: operation.operationId,
    tags: [operation.tag],
    summary: operation.summary,
    description: operation.description,
    ...(hasProperties(operation.params) ? { params: operation.params } : {}),
    // Always present: an empty strict query makes unknown query parameters a 400 naming them.
    querystring: operation.query,
    ...(operation.body ? { body: operation.body } : {}),
    ...(operation.idempotency ? { headers: idempotencyHeaders(operation) } : {}),
    response: {
      [operation.status]: operation.status === 204 ? { type: 'null', description: 'No content' } : operation.response,
      ...Object.fromEntries(operation.statuses.slice(1).map((status) => [status, operation.response])),
      // A body sent as anything but application/json is 415 M2M_UNSUPPORTED_MEDIA_TYPE.
      ...errorResponses(...operation.errors, ...(operation.body ? [415] : [])),
    },
    'x-scopes': operation.scopes,
    ...(operation.scopeMode === 'any' ? { 'x-scopes-mode': 'any' } : {}),
    ...(operation.extension ? { 'x-extension': true } : {}),
    ...operation.documentExtras,
  };
}

function adminRouteSchema(operation: AdminOperation): Record<string, unknown> {
  const response: Record<number, unknown> = { ...errorResponses(...operation.errors) };
  for (const status of operation.statuses) response[status] = operation.response;
  return {
    operationId: operation.operationId,
    summary: operation.summary,
    ...(hasProperties(operation.params) ? { params: operation.params } : {}),
    querystring: operation.query,
    ...(operation.body ? { body: operation.body } : {}),
    response,
  };
}

/** The route schema of an operation: what Fastify validates and what its surface's OpenAPI document says. */
function routeSchema(operation: CatalogueOperation): Record<string, unknown> {
  return operation.surface === 'admin' ? adminRouteSchema(operation) : publicRouteSchema(operation);
}

/** Path parameters, query and body merged into one object (validated already). */
function inputOf(request: FastifyRequest): Record<string, unknown> {
  const parts = [request.params, request.query, request.body];
  const input: Record<string, unknown> = {};
  for (const part of parts) if (part && typeof part === 'object') Object.assign(input, part);
  return input;
}

function headerKey(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Checks an admin answer against its declared schema before it is serialised. The serialiser drops fields a
 * schema does not list; the admin API is low-volume, so a drift between a service and its schema is a logged
 * 500 (and a failing test) rather than a silently missing field.
 */
function responseChecker(operation: AdminOperation): (body: unknown) => void {
  let validate: ValidateFunction | undefined;
  return (body) => {
    validate ??= buildAjv({ coerceTypes: false }).compile(dereference(operation.response) as object);
    // As the wire sees it: properties set to undefined are absent.
    if (!validate(JSON.parse(JSON.stringify(body)))) {
      throw new Error(`admin ${operation.operationId}: response does not match its schema: ${JSON.stringify(validate.errors)}`);
    }
  };
}

type RouteHandler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;

/** A public operation: the API key (authenticated and scope-checked by the prefix's hook) acts, under Idempotency-Key when declared. */
function publicHandler<S>(services: S & RouteServices, operation: Operation<S>): RouteHandler {
  return async (request, reply) => {
    const ctx = keyCtx(principalOf(request), request.id);
    const result = await executeOperation(services, operation, ctx, inputOf(request), headerKey(request));
    if (result.replayed) reply.header('Idempotent-Replayed', 'true');
    if (operation.status === 204) return reply.status(204).send(null);
    const status = result.status ?? operation.status;
    // The same bytes and content-type as the schema's serializer would give (Fastify sends a string as it is).
    if (result.body instanceof BinaryBody) {
      const { bytes, contentType, filename } = result.body;
      return reply.status(status).headers({ 'content-type': contentType, 'content-length': String(bytes.length), 'content-disposition': attachment(filename) }).send(bytes);
    }
    if (result.body instanceof JsonText) return reply.status(status).type('application/json; charset=utf-8').send(result.body.text);
    return reply.status(status).send(result.body);
  };
}

/** `attachment` with the file's name: ASCII as `filename`, the name itself as RFC 5987 `filename*` (RFC 6266). */
export function attachment(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** An admin operation: the admin (authenticated by the prefix's hook) acts for the path's tenant, which must exist. */
function adminHandler<S>(services: S & RouteServices, operation: AdminOperation<S>): RouteHandler {
  const check = responseChecker(operation);
  return async (request, reply) => {
    const { tenantId, ...input } = inputOf(request);
    if (typeof tenantId === 'string') await services.tenants.require(tenantId);
    const ctx = adminCtx(typeof tenantId === 'string' ? tenantId : '', request.id);
    const result = await operation.run(services, ctx, input);
    const [status, body] = result instanceof WithStatus ? [result.status, result.body] : [operation.status, result];
    check(body);
    return reply.status(status).send(body);
  };
}

/**
 * Registers operations of the catalogue as Fastify routes: one loop, no per-route code. Called once per surface,
 * inside the prefix (/m2m/v1 or /admin/v1) whose hook authenticates that surface's caller.
 */
export function registerOperations<S>(app: FastifyInstance, services: S & RouteServices, operations: readonly CatalogueOperation<S>[]): void {
  for (const operation of operations) {
    app.route({
      method: operation.method,
      url: fastifyPath(operation.path),
      ...(operation.surface === 'public' ? { config: { scopes: [...operation.scopes], scopeMode: operation.scopeMode } } : {}),
      ...(operation.bodyLimit ? { bodyLimit: operation.bodyLimit } : {}),
      schema: routeSchema(operation),
      handler: operation.surface === 'admin' ? adminHandler(services, operation) : publicHandler(services, operation),
    });
  }
}
