import type { Operation } from './define.js';

type Json = Record<string, unknown>;

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
