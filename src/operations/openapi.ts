import type { FastifySchema } from 'fastify';
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

/**
 * The public document: @fastify/swagger writes paths relative to the server URL (/m2m/v1) and hides admin
 * and health routes; this keeps only the public API's paths and adds each operation's request and response
 * examples to its media types (a `$ref` response schema cannot carry them).
 */
export function publicDocument(document: object, operations: readonly Operation[]): Json {
  const doc: Json = Object.fromEntries(Object.entries(document));
  const paths: Json = {};
  for (const [path, item] of Object.entries(isObject(doc.paths) ? doc.paths : {})) {
    if (!path.startsWith('/admin/') && !path.startsWith('/m2m/')) paths[path] = item;
  }
  const out = { ...doc, paths };
  for (const operation of operations) {
    const entry = operationEntry(out, operation);
    if (!entry) continue;
    setJsonExample(entry.requestBody, operation.examples.request);
    const responses = entry.responses;
    if (isObject(responses)) setJsonExample(responses[String(operation.status)], operation.examples.response);
  }
  return out;
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
