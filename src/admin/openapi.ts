import type { TObject } from 'typebox';
import { dereference } from '../operations/shared-schemas.js';
import type { AdminOperation } from './define.js';
import { adminRouteSchema } from './rest.js';

type Json = ReturnType<typeof dereference>;

function parameters(schema: TObject, where: 'path' | 'query'): Json[] {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties).map(([name, property]) => ({ name, in: where, required: where === 'path' || required.has(name), schema: dereference(property) }));
}

function jsonContent(schema: unknown): { content: Json } {
  return { content: { 'application/json': { schema: dereference(schema) } } };
}

/**
 * The admin API's own OpenAPI document, served behind the admin token. Built from the admin catalogue
 * (the public document hides these routes), with every schema inlined so it stands alone.
 */
export function adminDocument(operations: readonly AdminOperation[]): Record<string, unknown> {
  const paths: Record<string, Record<string, Json>> = {};
  for (const operation of operations) {
    const schema = adminRouteSchema(operation);
    const responses: Record<string, Json> = {};
    for (const [status, response] of Object.entries(schema.response as Record<string, unknown>)) {
      responses[status] = { description: response === operation.response ? 'Success' : 'Error envelope', ...jsonContent(response) };
    }
    paths[operation.path] ??= {};
    paths[operation.path][operation.method.toLowerCase()] = {
      operationId: operation.operationId,
      summary: operation.summary,
      parameters: [...parameters(operation.params, 'path'), ...parameters(operation.query, 'query')],
      ...(operation.body ? { requestBody: { required: true, ...jsonContent(operation.body) } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Admin API', version: '1.0.0', description: 'Provisioning and the outside world (inbound messages, PMS sync, CRM). Not part of the public API.' },
    servers: [{ url: '/admin/v1' }],
    components: { securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' } } },
    security: [{ adminToken: [] }],
    paths,
  };
}
