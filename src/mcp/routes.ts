import type { FastifyInstance } from 'fastify';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import * as formats from 'ajv-formats';
import type { Principal } from '../auth/keys.js';
import { insufficientScope } from '../auth/keys.js';
import { missingScopes } from '../auth/scopes.js';
import { DomainError, errorBody } from '../errors.js';
import { principalOf } from '../http/auth.js';
import type { Services } from '../services.js';
import { TOOLS, type ToolDefinition } from './tools.js';

const addFormats = (formats as unknown as { default: formats.FormatsPlugin }).default;

function compileTools(): Map<string, { tool: ToolDefinition; validate: ValidateFunction }> {
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false, coerceTypes: false });
  addFormats(ajv);
  return new Map(TOOLS.map((tool) => [tool.name, { tool, validate: ajv.compile(tool.input) }]));
}

function errorResult(code: string, message: string, details: Record<string, unknown> = {}) {
  return { isError: true, content: [{ type: 'text' as const, text: JSON.stringify(errorBody(code as never, message, details)) }] };
}

/** One MCP server per request (stateless Streamable HTTP): tools run as the request's API key. */
function mcpServer(services: Services, principal: Principal, tools: ReturnType<typeof compileTools>): Server {
  const server = new Server({ name: 'm2m-messaging-api', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: TOOLS.map((tool) => ({ name: tool.name, description: `${tool.description} Requires: ${tool.scopes.join(', ')}.`, inputSchema: tool.input as never })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const entry = tools.get(request.params.name);
    if (!entry) return errorResult('M2M_NOT_FOUND', `unknown tool ${request.params.name}`);
    const missing = missingScopes(principal.scopes, entry.tool.scopes);
    if (missing.length > 0) {
      const error = insufficientScope(entry.tool.scopes, missing);
      return errorResult(error.code, error.message, error.details);
    }
    const input = structuredClone(request.params.arguments ?? {}) as Record<string, unknown>;
    if (!entry.validate(input)) {
      const issues = (entry.validate.errors ?? []).map((e) => ({ path: `arguments${e.instancePath.replace(/\//g, '.')}`, message: e.message ?? 'is invalid' }));
      return errorResult('M2M_INVALID_REQUEST', issues.map((i) => `${i.path}: ${i.message}`).join('; '), { issues });
    }
    try {
      const result = await entry.tool.run(services, principal, input);
      return { content: [{ type: 'text' as const, text: JSON.stringify(result) }], structuredContent: result as Record<string, unknown> };
    } catch (error) {
      if (error instanceof DomainError) return errorResult(error.code, error.message, error.details);
      services.log.error({ err: error, tool: entry.tool.name }, 'MCP tool failed');
      return errorResult('M2M_INTERNAL_ERROR', 'internal error');
    }
  });
  return server;
}

/** MCP (Streamable HTTP, stateless) at POST /m2m/v1/mcp, behind the same bearer keys and scopes. */
export function mcpRoutes(services: Services) {
  const tools = compileTools();
  return async (app: FastifyInstance): Promise<void> => {
    app.post('/mcp', { schema: { hide: true } }, async (request, reply) => {
      const principal = principalOf(request);
      const server = mcpServer(services, principal, tools);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.hijack();
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    });
    for (const method of ['GET', 'DELETE'] as const) {
      app.route({
        method,
        url: '/mcp',
        schema: { hide: true },
        handler: async (_request, reply) => reply.status(405).header('allow', 'POST').send(errorBody('M2M_INVALID_REQUEST', 'this MCP endpoint is stateless: use POST')),
      });
    }
  };
}
