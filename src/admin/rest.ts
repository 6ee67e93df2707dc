import type { FastifyInstance } from 'fastify';
import type { ValidateFunction } from 'ajv';
import { adminCtx } from '../context.js';
import { errorResponses } from '../http/schemas.js';
import { buildAjv } from '../http/validation.js';
import { fastifyPath, inputOf } from '../operations/rest.js';
import { dereference } from '../operations/shared-schemas.js';
import { WithStatus, type AdminOperation, type AdminServices } from './define.js';

function hasProperties(operation: AdminOperation, part: 'params' | 'query'): boolean {
  return Object.keys(operation[part].properties).length > 0;
}

/** The route schema of an admin operation: hidden from the public document, every answered status declared. */
export function adminRouteSchema(operation: AdminOperation): Record<string, unknown> {
  const response: Record<number, unknown> = { ...errorResponses(...operation.errors) };
  for (const status of operation.statuses) response[status] = operation.response;
  return {
    hide: true,
    operationId: operation.operationId,
    summary: operation.summary,
    ...(hasProperties(operation, 'params') ? { params: operation.params } : {}),
    querystring: operation.query,
    ...(operation.body ? { body: operation.body } : {}),
    response,
  };
}

/**
 * Checks an answer against its declared schema before it is serialised. The serialiser drops fields a schema
 * does not list; the admin API is low-volume, so a drift between a service and its schema is a logged 500
 * (and a failing test) rather than a silently missing field.
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

/** Registers every admin operation as a Fastify route: one loop. The tenant comes from the path and must exist. */
export function registerAdminOperations(app: FastifyInstance, services: AdminServices, operations: readonly AdminOperation[]): void {
  for (const operation of operations) {
    const check = responseChecker(operation);
    app.route({
      method: operation.method,
      url: fastifyPath(operation.path),
      ...(operation.bodyLimit ? { bodyLimit: operation.bodyLimit } : {}),
      schema: adminRouteSchema(operation),
      handler: async (request, reply) => {
        const { tenantId, ...input } = inputOf(request);
        if (typeof tenantId === 'string') await services.tenants.require(tenantId);
        const ctx = adminCtx(typeof tenantId === 'string' ? tenantId : '', request.id);
        const result = await operation.run(services, ctx, input);
        const [status, body] = result instanceof WithStatus ? [result.status, result.body] : [operation.status, result];
        check(body);
        return reply.status(status).send(body);
      },
    });
  }
}
