import type { Ajv, ValidateFunction } from 'ajv';
import fastJson from 'fast-json-stringify';
import type { TObject } from 'typebox';
import { buildAjv } from '../http/validation.js';
import { OPERATIONS, toolName, type CatalogueServices } from '../operations/catalogue.js';
import { AREAS, BinaryToolOutput, type Area, type Operation } from '../operations/define.js';
import { dereference } from '../operations/shared-schemas.js';
import { IDEMPOTENCY_KEY_LENGTH } from '../platform/idempotency.js';

const IDEMPOTENCY_KEY = { type: 'string', ...IDEMPOTENCY_KEY_LENGTH, description: 'Idempotency-Key: reuse the same value when retrying this call; a different input under the same key is refused' };

/** One MCP tool per public operation: the same schemas, scopes and service call as its REST route. */
export interface Tool {
  name: string;
  operation: Operation<CatalogueServices>;
  definition: {
    name: string;
    title: string;
    description: string;
    inputSchema: { type: 'object'; properties: Record<string, unknown>; required?: string[]; additionalProperties: false };
    outputSchema?: { type: 'object'; [key: string]: unknown };
    annotations: { title: string; readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
  };
  /** Validators of the input's parts (path parameters, query, body), each with its own rules. */
  parts: Array<{ name: 'params' | 'query' | 'body'; fields: Set<string>; validate: ValidateFunction }>;
  /** The REST response body, byte for byte: extra fields dropped exactly as the route's serializer drops them. */
  serialize: (body: unknown) => string;
}

function objectSchema(value: unknown): value is fastJson.ObjectSchema & { type: 'object'; [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && 'type' in value && value.type === 'object';
}

function inputSchema(operation: Operation): Tool['definition']['inputSchema'] {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const part of [operation.params, operation.query, operation.body]) {
    if (!part) continue;
    const json = dereference(part);
    if (!objectSchema(json)) continue;
    Object.assign(properties, json.properties ?? {});
    if (Array.isArray(json.required)) required.push(...json.required.filter((name): name is string => typeof name === 'string'));
  }
  if (operation.idempotency) {
    properties.idempotencyKey = IDEMPOTENCY_KEY;
    if (operation.idempotency.key === 'required') required.push('idempotencyKey');
  }
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false };
}

/** Operations named in a description (`getMessageRequestStatus`), as a model sees them: by tool name. */
const OPERATION_NAMES = new RegExp(`\\b(${OPERATIONS.map((operation) => operation.operationId).join('|')})\\b`, 'g');

/** The operation's description in a tool's words: other operations by tool name, the Idempotency-Key header as the argument. */
function describe(operation: Operation): string {
  const text = operation.description.replace(OPERATION_NAMES, (operationId) => toolName(operationId)).replace(/Idempotency-Key/g, 'idempotencyKey');
  const toolsetNote = `Toolset: ${operation.area}. Requires ${operation.scopeMode === 'any' ? 'any of the scopes' : 'scopes'}: ${operation.scopes.join(', ')}.`;
  return `${text}\n\n${toolsetNote}`;
}

function buildTool(operation: Operation<CatalogueServices>, ajv: Ajv): Tool {
  const name = toolName(operation.operationId);
  // Raw bytes come back as their description, with the bytes in base64 when small (src/mcp/routes.ts).
  const output = operation.status === 204 ? undefined : operation.binary ? dereference(BinaryToolOutput) : dereference(operation.response);
  const parts: Tool['parts'] = [];
  const named: Array<['params' | 'query' | 'body', TObject | undefined]> = [['params', operation.params], ['query', operation.query], ['body', operation.body]];
  for (const [partName, schema] of named) {
    if (!schema) continue;
    const json = dereference(schema);
    if (!objectSchema(json)) throw new Error(`${operation.operationId}: ${partName} is not an object schema`);
    parts.push({ name: partName, fields: new Set(Object.keys(schema.properties)), validate: ajv.compile(json) });
  }
  const stringify = objectSchema(output) ? fastJson(output) : () => 'null';
  return {
    name,
    operation,
    definition: {
      name,
      title: operation.summary,
      description: describe(operation),
      inputSchema: inputSchema(operation),
      ...(objectSchema(output) ? { outputSchema: output } : {}),
      annotations: {
        title: operation.summary,
        readOnlyHint: operation.readOnly,
        destructiveHint: operation.destructive,
        idempotentHint: operation.idempotent,
        openWorldHint: operation.openWorld,
      },
    },
    parts,
    serialize: (body) => stringify(body),
  };
}

/** Every tool, built once per process (schemas compiled up front). */
export function buildTools(): Map<string, Tool> {
  const ajv = buildAjv({ coerceTypes: false });
  return new Map(OPERATIONS.map((operation) => [toolName(operation.operationId), buildTool(operation, ajv)]));
}

export interface ToolFilter {
  toolsets: ReadonlySet<Area> | undefined;
  readOnly: boolean;
}

/** Parses `toolsets` (comma list) and `readonly`; unknown toolset names are returned for a 400. */
export function parseToolFilter(toolsets: string | undefined, readOnly: string | undefined): { filter: ToolFilter; unknown: string[] } {
  const names = toolsets === undefined ? [] : toolsets.split(',').map((name) => name.trim()).filter((name) => name.length > 0);
  const areas = new Set<Area>();
  const unknown: string[] = [];
  for (const name of names) {
    const area = AREAS.find((candidate) => candidate === name);
    if (area) areas.add(area);
    else unknown.push(name);
  }
  return { filter: { toolsets: toolsets === undefined ? undefined : areas, readOnly: readOnly === 'true' }, unknown };
}

/** A tool is offered when its toolset is selected, it reads (in read-only mode), and the key holds its scopes. */
export function toolVisible(tool: Tool, filter: ToolFilter, hasScopes: boolean): boolean {
  if (filter.toolsets && !filter.toolsets.has(tool.operation.area)) return false;
  if (filter.readOnly && !tool.operation.readOnly) return false;
  return hasScopes;
}
