import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Type } from 'typebox';
import { insufficientScope, type Principal } from '../auth/keys.js';
import { refusedScopes } from '../auth/scopes.js';
import { keyCtx } from '../auth/context.js';
import { DomainError, errorBody, invalid, type ErrorCode, type Issue } from '../errors.js';
import { principalOf } from '../http/auth.js';
import { Strict, StringEnum } from '../http/schemas.js';
import { executeOperation, type ExecuteServices } from '../operations/execute.js';
import type { CatalogueServices } from '../operations/catalogue.js';
import { AREAS, BinaryBody } from '../operations/define.js';
import { IDEMPOTENCY_KEY_LENGTH, isIdempotencyKey } from '../platform/idempotency.js';
import { JsonText } from '../platform/json-text.js';
import { checkArguments } from './arguments.js';
import { markGuestText, UNTRUSTED_NOTE } from './guest-text.js';
import { SERVER_INSTRUCTIONS } from './instructions.js';
import { buildTools, parseToolFilter, toolVisible, type Tool, type ToolFilter } from './tools.js';

/** The operations' services, and the log for a tool that fails unexpectedly. */
type McpServices = CatalogueServices & ExecuteServices & { log: Logger };

const McpQuery = Type.Object(
  {
    toolsets: Type.Optional(Type.String({ maxLength: 200, description: `Comma list of toolsets: ${AREAS.join(', ')}` })),
    readonly: Type.Optional(StringEnum(['true', 'false'])),
  },
  Strict,
);

/** A tool's error: the REST error body, with the request id in `details` (a tool result has no headers to carry it). */
function errorResult(requestId: string, code: ErrorCode, message: string, details: Record<string, unknown> = {}): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(errorBody(code, message, { ...details, requestId })) }] };
}

/** Why a tool that exists is not offered on this connection, when its toolsets or read-only mode hide it. */
function hiddenBecause(tool: Tool, filter: ToolFilter): { reason: string; message: string } | undefined {
  const { area } = tool.operation;
  if (filter.toolsets && !filter.toolsets.has(area)) {
    const selected = [...filter.toolsets].join(', ') || '(none)';
    return { reason: 'tool_not_in_toolsets', message: `tool ${tool.name} is not in the selected toolsets: ${selected}; it belongs to toolset ${area}` };
  }
  if (filter.readOnly && !tool.operation.readOnly) return { reason: 'tool_hidden_by_readonly', message: `tool ${tool.name} is hidden by readonly=true: it changes data` };
  return undefined;
}

/** Bytes a tool answers inline (base64) at most; larger ones are described, to be fetched over REST. */
export const MCP_INLINE_BYTES = 1024 * 1024;

/** Raw bytes as a tool's answer: what they are and, when small enough, the bytes in base64. */
function binaryForTool({ bytes, contentType, filename }: BinaryBody) {
  const inline = bytes.length <= MCP_INLINE_BYTES;
  return {
    contentType,
    sizeBytes: bytes.length,
    filename,
    ...(inline
      ? { contentBase64: bytes.toString('base64') }
      : { note: `larger than ${MCP_INLINE_BYTES} bytes: not inlined; download it with the REST operation (same path, same key)` }),
  };
}

/** A successful result: the REST body, guest-written text marked as untrusted (and a note saying so when any is). */
function successResult(text: string): CallToolResult {
  const { value, marked } = markGuestText(JSON.parse(text));
  const structured = value !== null && typeof value === 'object' && !Array.isArray(value) ? { structuredContent: Object.fromEntries(Object.entries(value)) } : {};
  if (!marked) return { content: [{ type: 'text', text }], ...structured };
  return { content: [{ type: 'text', text: JSON.stringify(value) }, { type: 'text', text: UNTRUSTED_NOTE }], ...structured };
}

/** Splits a tool's arguments into the operation's parts and validates each with its own schema (defaults applied). */
function validateInput(tool: Tool, args: Record<string, unknown>): { input: Record<string, unknown>; idempotencyKey?: string } {
  const issues: Issue[] = [];
  const input: Record<string, unknown> = {};
  const known = new Set(['idempotencyKey', ...tool.parts.flatMap((part) => [...part.fields])]);
  for (const name of Object.keys(args)) if (!known.has(name)) issues.push({ path: `arguments.${name}`, message: 'unknown property' });
  for (const part of tool.parts) {
    const value: Record<string, unknown> = {};
    for (const field of part.fields) if (args[field] !== undefined) value[field] = args[field];
    if (!part.validate(value)) {
      for (const error of part.validate.errors ?? []) {
        const missing = typeof error.params.missingProperty === 'string' ? `.${error.params.missingProperty}` : '';
        issues.push({ path: `arguments${error.instancePath.replace(/\//g, '.')}${missing}`, message: missing ? 'is required' : (error.message ?? 'is invalid') });
      }
    }
    Object.assign(input, value);
  }
  const key = args.idempotencyKey;
  if (key !== undefined && (!tool.operation.idempotency || !isIdempotencyKey(key))) {
    const { minLength, maxLength } = IDEMPOTENCY_KEY_LENGTH;
    issues.push({ path: 'arguments.idempotencyKey', message: tool.operation.idempotency ? `must be a string of ${minLength} to ${maxLength} characters` : 'unknown property' });
  }
  if (tool.operation.idempotency?.key === 'required' && key === undefined) issues.push({ path: 'arguments.idempotencyKey', message: 'is required' });
  if (issues.length > 0) throw new DomainError('M2M_INVALID_REQUEST', issues.map((issue) => `${issue.path}: ${issue.message}`).join('; '), { issues });
  return { input, ...(typeof key === 'string' ? { idempotencyKey: key } : {}) };
}

/** One MCP server per request (stateless Streamable HTTP): tools run as the request's API key. */
function mcpServer(services: McpServices, principal: Principal, requestId: string, tools: Map<string, Tool>, filter: ToolFilter): Server {
  const server = new Server({ name: 'm2m-messaging-api', version: '1.0.0' }, { capabilities: { tools: {} }, instructions: SERVER_INSTRUCTIONS });
  const allowed = (tool: Tool) => refusedScopes(principal.scopes, tool.operation.scopes, tool.operation.scopeMode).length === 0;
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [...tools.values()].filter((tool) => toolVisible(tool, filter, allowed(tool))).map((tool) => tool.definition),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const tool = tools.get(request.params.name);
    if (!tool) return errorResult(requestId, 'M2M_NOT_FOUND', `unknown tool ${request.params.name}`);
    const hidden = hiddenBecause(tool, filter);
    if (hidden) return errorResult(requestId, 'M2M_INVALID_REQUEST', hidden.message, { reason: hidden.reason });
    const missing = refusedScopes(principal.scopes, tool.operation.scopes, tool.operation.scopeMode);
    if (missing.length > 0) {
      const error = insufficientScope([...tool.operation.scopes], missing);
      const needs = tool.operation.scopeMode === 'any' ? `one of the scopes ${missing.join(', ')}` : `scope ${missing.join(', ')}`;
      return errorResult(requestId, error.code, `tool ${tool.name} needs ${needs}, which this API key lacks`, error.details);
    }
    try {
      const { input, idempotencyKey } = validateInput(tool, request.params.arguments ?? {});
      const result = await executeOperation(services, tool.operation, keyCtx(principal, requestId), input, idempotencyKey);
      if (result.body instanceof BinaryBody) return successResult(JSON.stringify(binaryForTool(result.body)));
      return successResult(result.body instanceof JsonText ? result.body.text : tool.serialize(result.body));
    } catch (error) {
      if (error instanceof DomainError) return errorResult(requestId, error.code, error.message, error.details);
      services.log.error({ err: error, tool: tool.name, requestId }, 'MCP tool failed');
      return errorResult(requestId, 'M2M_INTERNAL_ERROR', 'internal error');
    }
  });
  return server;
}

function headerValue(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** A JSON-RPC error answered before the MCP SDK sees the message (it would recurse over the arguments). */
function rpcError(reply: FastifyReply, id: unknown, message: string, data: Record<string, unknown>) {
  return reply.status(200).send({ jsonrpc: '2.0', id: typeof id === 'string' || typeof id === 'number' ? id : null, error: { code: -32602, message, data } });
}

/** MCP (Streamable HTTP, stateless) at POST /m2m/v1/mcp, behind the same bearer keys and scopes. */
export function mcpRoutes(services: McpServices) {
  const tools = buildTools();
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    app.post('/mcp', { schema: { hide: true, querystring: McpQuery } }, async (request, reply) => {
      const principal = principalOf(request);
      const params = request.query;
      const { filter, unknown } = parseToolFilter(params.toolsets ?? headerValue(request, 'x-mcp-toolsets'), params.readonly ?? headerValue(request, 'x-mcp-readonly'));
      if (unknown.length > 0) throw invalid('query.toolsets', `unknown toolsets: ${unknown.join(', ')} (known: ${AREAS.join(', ')})`);
      const refused = checkArguments(request.body);
      if (refused) return rpcError(reply, refused.id, refused.message, { requestId: request.id });
      const server = mcpServer(services, principal, request.id, tools, filter);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.raw.setHeader('X-Request-Id', request.id);
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
