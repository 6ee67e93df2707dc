import type { FastifySchema } from 'fastify';
import { errorExamples } from '../docs/error-examples.js';
import { introduction } from '../docs/introduction.js';
import { webhooksSection } from '../docs/webhooks.js';
import type { Operation } from './define.js';

type Json = Record<string, unknown>;

/** How both documents name a shared schema: by its `$id` (`#/components/schemas/ConversationItem`). */
export const OPENAPI_REFERENCES = {
  buildLocalReference: (json: Json, _base: unknown, _fragment: string, i: number) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
};

/** The public document's generator leaves the admin API out: those routes are the admin document's. */
export function hideAdminRoutes({ schema, url }: { schema: FastifySchema; url: string }): { schema: FastifySchema; url: string } {
  return { schema: url.startsWith('/admin/') ? { ...schema, hide: true } : schema, url };
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `doc.paths[path][method]` as an object, when present. */
function operationEntry(doc: Json, operation: Operation): Json | undefined {
  const paths = doc.paths;
  if (!isObject(paths)) return undefined;
  const item = paths[operation.path];
  if (!isObject(item)) return undefined;
  const entry = item[operation.method.toLowerCase()];
  return isObject(entry) ? entry : undefined;
}

function setJsonExample(holder: unknown, example: unknown): void {
  if (!isObject(holder) || example === undefined) return;
  const content = holder.content;
  if (!isObject(content)) return;
  const json = content['application/json'];
  if (isObject(json)) json.example = example;
}

/** What each error status means, as the response's description on the reference page. */
const ERROR_TITLES: Record<number, string> = {
  400: 'Invalid request or cursor',
  401: 'Missing or invalid API key',
  403: 'The key lacks a required scope',
  404: 'Not found (or another business’s)',
  409: 'Conflict',
  413: 'Payload too large',
  415: 'Body not JSON',
  429: 'Rate limited: retry after Retry-After seconds',
};

const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': { description: 'Requests the key may burst', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the bucket now', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the bucket is full again', schema: { type: 'integer' } },
};

const ERROR_SCHEMA = { $ref: '#/components/schemas/ErrorBody' };

/** The lines the page adds under an operation's own description: its scopes and how it takes an Idempotency-Key. */
function operationNotes(operation: Operation): string {
  const scopes = operation.scopes.map((scope) => `\`${scope}\``).join(operation.scopeMode === 'any' ? ' or ' : ', ');
  const notes = [`**Scopes:** ${scopes}${operation.scopeMode === 'any' ? ' (any one; the answer holds only what the key can read)' : ''}.`];
  if (operation.idempotency) {
    notes.push(`**Idempotency-Key:** ${operation.idempotency.key}. Reuse it to retry; a different body under the same key is 409 \`M2M_IDEMPOTENCY_CONFLICT\`.`);
  }
  const reasons = [...new Set(operation.knownErrors.flatMap((error) => (error.reason ? [`\`${error.reason}\` (${error.status})`] : [])))];
  if (reasons.length > 0) notes.push(`**Error reasons** (\`details.reason\`): ${reasons.join(', ')}.`);
  return notes.join('\n\n');
}

/** Every error status of the operation with real example answers (Swagger UI shows them in a menu). */
function documentErrors(entry: Json, operation: Operation): void {
  const responses: Json = isObject(entry.responses) ? entry.responses : {};
  const byStatus = errorExamples(operation);
  for (const status of operation.errors) {
    // A status the contract names for the operation but no code path of this server answers: said plainly, no invented example.
    const response = responses[String(status)];
    if (!byStatus.has(status) && isObject(response)) response.description = `${ERROR_TITLES[status] ?? 'Error'}: reserved by the contract; this server does not answer it today`;
  }
  for (const [status, examples] of byStatus) {
    const existing = responses[String(status)];
    const response: Json = isObject(existing) ? existing : { content: { 'application/json': { schema: ERROR_SCHEMA } } };
    response.description = ERROR_TITLES[status] ?? 'Error';
    const content = isObject(response.content) ? response.content : {};
    const json = isObject(content['application/json']) ? content['application/json'] : { schema: ERROR_SCHEMA };
    delete json.example;
    json.examples = Object.fromEntries(examples.map((item) => [item.name, { summary: item.summary, value: item.value }]));
    response.content = { ...content, 'application/json': json };
    if (status === 429) response.headers = { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } }, ...RATE_LIMIT_HEADERS };
    responses[String(status)] = response;
  }
  entry.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * The public document: @fastify/swagger writes paths relative to the server URL (/m2m/v1) and hides admin
 * and health routes; this keeps only the public API's paths and makes the page teach: the introduction, each
 * operation's scopes, request and response examples on its media types (a `$ref` response schema cannot carry
 * them), real error examples per status, and the webhooks every event type is delivered by.
 */
export function publicDocument(document: object, operations: readonly Operation[]): Json {
  const doc: Json = JSON.parse(JSON.stringify(document));
  const paths: Json = {};
  for (const [path, item] of Object.entries(isObject(doc.paths) ? doc.paths : {})) {
    if (!path.startsWith('/admin/') && !path.startsWith('/m2m/')) paths[path] = item;
  }
  const info = isObject(doc.info) ? doc.info : {};
  const out = { ...doc, info: { ...info, description: introduction() }, paths, webhooks: webhooksSection() };
  for (const operation of operations) {
    const entry = operationEntry(out, operation);
    if (!entry) continue;
    entry.description = `${operation.description}\n\n${operationNotes(operation)}`;
    setJsonExample(entry.requestBody, operation.examples.request);
    const responses = entry.responses;
    if (isObject(responses) && operation.binary) responses[String(operation.status)] = binaryResponse();
    else if (isObject(responses)) setJsonExample(responses[String(operation.status)], operation.examples.response);
    documentErrors(entry, operation);
  }
  return out;
}

/** The success answer of an operation that answers raw bytes (a media download). */
function binaryResponse(): Json {
  return {
    description: 'The bytes, with their own Content-Type',
    headers: {
      'Content-Type': { description: 'The media type of the bytes (e.g. image/jpeg)', schema: { type: 'string' } },
      'Content-Length': { description: 'Their size in bytes', schema: { type: 'integer' } },
      'Content-Disposition': { description: 'attachment, with the file name when one is known', schema: { type: 'string' } },
    },
    content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
  };
}

const COMPONENT_REF = '#/components/schemas/';

/**
 * A document that stands alone: every `$ref` to `components.schemas` replaced by the schema itself, and the
 * schemas dropped from `components`. The admin document is read on its own, by tools with no resolver.
 */
export function selfContained(document: object): Json {
  const doc: Json = JSON.parse(JSON.stringify(document));
  const components = isObject(doc.components) ? doc.components : {};
  const schemas = isObject(components.schemas) ? components.schemas : {};
  const inline = (node: unknown, seen: readonly string[]): unknown => {
    if (Array.isArray(node)) return node.map((item) => inline(item, seen));
    if (!isObject(node)) return node;
    const ref = node.$ref;
    if (typeof ref === 'string' && ref.startsWith(COMPONENT_REF)) {
      const name = ref.slice(COMPONENT_REF.length);
      if (seen.includes(name) || !(name in schemas)) throw new Error(`cannot inline schema reference ${ref}`);
      return inline(schemas[name], [...seen, name]);
    }
    return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, inline(value, seen)]));
  };
  const { schemas: _schemas, ...otherComponents } = components;
  return { ...doc, paths: inline(doc.paths, []), components: otherComponents };
}
