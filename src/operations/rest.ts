import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type TObject, type TSchema } from 'typebox';
import { keyCtx } from '../context.js';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import { IDEMPOTENCY_KEY_LENGTH } from '../platform/idempotency.js';
import { JsonText, type Operation } from './define.js';
import { executeOperation, type ExecuteServices } from './execute.js';

const IdempotencyKeyValue = Type.String({ ...IDEMPOTENCY_KEY_LENGTH, description: 'Stable per logical request; a retry with the same key and body replays the first answer' });

/** `/webhooks/{subscriptionId}` → `/webhooks/:subscriptionId` */
export function fastifyPath(path: string): string {
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

/** The route schema of an operation: what Fastify validates and what OpenAPI documents. */
export function routeSchema(operation: Operation): Record<string, unknown> {
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
      ...errorResponses(...operation.errors),
    },
    'x-scopes': operation.scopes,
    ...(operation.scopeMode === 'any' ? { 'x-scopes-mode': 'any' } : {}),
    ...(operation.extension ? { 'x-extension': true } : {}),
  };
}

/** Path parameters, query and body merged into one object (validated already). */
export function inputOf(request: FastifyRequest): Record<string, unknown> {
  const parts = [request.params, request.query, request.body];
  const input: Record<string, unknown> = {};
  for (const part of parts) if (part && typeof part === 'object') Object.assign(input, part);
  return input;
}

function headerKey(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  return typeof value === 'string' ? value : undefined;
}

/** Registers every operation of the catalogue as a Fastify route: one loop, no per-route code. */
export function registerOperations(app: FastifyInstance, services: ExecuteServices, operations: readonly Operation[]): void {
  for (const operation of operations) {
    app.route({
      method: operation.method,
      url: fastifyPath(operation.path),
      config: { scopes: [...operation.scopes], scopeMode: operation.scopeMode },
      ...(operation.bodyLimit ? { bodyLimit: operation.bodyLimit } : {}),
      schema: routeSchema(operation),
      handler: async (request, reply) => {
        const ctx = keyCtx(principalOf(request), request.id);
        const result = await executeOperation(services, operation, ctx, inputOf(request), headerKey(request));
        if (result.replayed) reply.header('Idempotent-Replayed', 'true');
        if (operation.status === 204) return reply.status(204).send(null);
        // The same bytes and content-type as the schema's serializer would give (Fastify sends a string as it is).
        if (result.body instanceof JsonText) return reply.status(operation.status).type('application/json; charset=utf-8').send(result.body.text);
        return reply.status(operation.status).send(result.body);
      },
    });
  }
}
