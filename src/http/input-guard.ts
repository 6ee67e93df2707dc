import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import { invalid } from '../errors.js';

declare global {
  interface String {
    /** ES2024 (Node 20 has it); false when the string holds an unpaired surrogate. */
    isWellFormed(): boolean;
  }
}

/**
 * Checks every request's text input once, before schema validation, for what the database cannot store
 * (NUL) or what is not text (unpaired UTF-16 surrogates), and bounds the shape of JSON bodies before
 * validation walks them. Also refuses query parameters on routes that declare none. Each refusal is a 400
 * naming the field. Limits and their reasons are in docs/decisions.md ("Hostile input").
 */

export const INPUT_LIMITS = {
  /** Object and array nesting of a JSON body (our deepest input schema nests 4 levels). */
  depth: 32,
  /** Items of any one array (the widest input array allows 100). */
  arrayItems: 1000,
  /** Properties of any one object. */
  objectKeys: 1000,
  /** Body of a route that declares none (actions like rotate-secret). */
  bodylessBytes: 16 * 1024,
} as const;

/** date-time inputs: instants both databases store and print alike, with room for derived dates (expiry). */
export const DATE_TIME_MIN_MS = 0; // 1970-01-01T00:00:00Z
export const DATE_TIME_END_MS = Date.UTC(9999, 0, 1); // exclusive: the last accepted is 9998-12-31T23:59:59.999Z

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

function isCalendarDay(year: number, month: number, day: number): boolean {
  if (month < 1 || month > 12 || day < 1) return false;
  return day <= new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** RFC 3339 date-time (no leap second, at most 9 fraction digits) within [1970-01-01, 9999-01-01). */
export function isAcceptedDateTime(value: string): boolean {
  const m = DATE_TIME.exec(value);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (!isCalendarDay(year, month, day) || hour > 23 || minute > 59 || second > 59) return false;
  if (m[7] !== undefined && (Number(m[7]) > 23 || Number(m[8]) > 59)) return false;
  const ms = Date.parse(value);
  return ms >= DATE_TIME_MIN_MS && ms < DATE_TIME_END_MS;
}

/** Calendar date YYYY-MM-DD within the same years as date-times. */
export function isAcceptedDate(value: string): boolean {
  const m = DATE.exec(value);
  if (!m) return false;
  const [year, month, day] = m.slice(1, 4).map(Number);
  return year >= 1970 && year <= 9998 && isCalendarDay(year, month, day);
}

function textProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain NUL characters';
  if (!text.isWellFormed()) return 'must be valid Unicode text (unpaired surrogate)';
  return undefined;
}

/** JSON objects and Fastify's params/query objects (whose prototype is a bare `NullObject`), not Buffers. */
function isRecord(value: object): value is Record<string, unknown> {
  return !ArrayBuffer.isView(value) && !(value instanceof Date);
}

/**
 * The declared maxLength of each string property of a body schema, by its path (`body.text`). Validation counts
 * code points, walking the whole string; a string with over twice as many UTF-16 units as that has more code
 * points than allowed whatever it holds, so it is refused here, at no cost, with validation's own words.
 */
const lengthCaps = new WeakMap<object, Map<string, number>>();

function capsOf(schema: object): Map<string, number> {
  let caps = lengthCaps.get(schema);
  if (!caps) {
    caps = new Map();
    collectCaps(schema, 'body', caps);
    lengthCaps.set(schema, caps);
  }
  return caps;
}

function collectCaps(schema: unknown, path: string, caps: Map<string, number>): void {
  if (typeof schema !== 'object' || schema === null) return;
  if ('maxLength' in schema && typeof schema.maxLength === 'number') caps.set(path, schema.maxLength);
  if (!('properties' in schema) || typeof schema.properties !== 'object' || schema.properties === null) return;
  for (const [name, property] of Object.entries(schema.properties)) collectCaps(property, `${path}.${name}`, caps);
}

/** Throws a 400 for the first problem found under `path`; recursion stops at INPUT_LIMITS.depth. */
function check(value: unknown, path: string, depth: number, caps?: Map<string, number>): void {
  if (typeof value === 'string') {
    const cap = caps?.get(path);
    if (cap !== undefined && value.length > 2 * cap) throw invalid(path, `must NOT have more than ${cap} characters`);
    const problem = textProblem(value);
    if (problem) throw invalid(path, problem);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  if (Array.isArray(value)) {
    if (depth >= INPUT_LIMITS.depth) throw invalid(path, `nesting must not exceed ${INPUT_LIMITS.depth} levels`);
    if (value.length > INPUT_LIMITS.arrayItems) throw invalid(path, `must not have more than ${INPUT_LIMITS.arrayItems} items`);
    for (let i = 0; i < value.length; i += 1) check(value[i], `${path}.${i}`, depth + 1, caps);
    return;
  }
  // Buffers (raw-body routes) and other non-JSON objects are not text input.
  if (!isRecord(value)) return;
  if (depth >= INPUT_LIMITS.depth) throw invalid(path, `nesting must not exceed ${INPUT_LIMITS.depth} levels`);
  const keys = Object.keys(value);
  if (keys.length > INPUT_LIMITS.objectKeys) throw invalid(path, `must not have more than ${INPUT_LIMITS.objectKeys} properties`);
  for (const key of keys) {
    const problem = textProblem(key);
    if (problem) throw invalid(path, `property name ${problem}`);
    check(value[key], `${path}.${key}`, depth + 1, caps);
  }
}

function propertiesOf(schema: unknown): string[] {
  if (typeof schema !== 'object' || schema === null || !('properties' in schema)) return [];
  const properties = schema.properties;
  return typeof properties === 'object' && properties !== null ? Object.keys(properties) : [];
}

/**
 * A route that declares its input (any schema part or a response) but no query string takes no query
 * parameters; routes with no schema at all (health, MCP transport, provider callbacks) read their own.
 */
function takesNoQuery(request: FastifyRequest): boolean {
  const schema = request.routeOptions.schema;
  if (!schema || schema.querystring) return false;
  return schema.params !== undefined || schema.body !== undefined || schema.headers !== undefined || schema.response !== undefined;
}

/**
 * Bodies are checked on routes that declare one (or a response: every catalogue and admin route). A route with
 * no schema for either owns its body: the MCP transport answers hostile arguments as JSON-RPC errors itself.
 */
function declaresBody(request: FastifyRequest): boolean {
  const schema = request.routeOptions.schema;
  return schema !== undefined && (schema.body !== undefined || schema.response !== undefined);
}

/**
 * The body's declared string caps as `[path, maxLength]` pairs, for the JSON parser thread: a string the guard is
 * certain to refuse (over twice its cap) need not come back whole (json-body.ts). Undefined when the guard does not
 * check this route's body.
 */
export function bodyLengthCaps(request: FastifyRequest): Array<[string, number]> | undefined {
  const bodySchema = request.routeOptions.schema?.body;
  if (!declaresBody(request) || typeof bodySchema !== 'object' || bodySchema === null) return undefined;
  return [...capsOf(bodySchema)];
}

/** preValidation hook: the checks above, before Fastify's schema validation. */
export function inputGuardHook(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  try {
    const query = request.query;
    if (typeof query === 'object' && query !== null) {
      const names = Object.keys(query);
      if (names.length > 0 && takesNoQuery(request)) {
        throw invalid(`query.${names[0]}`, names.length > 1 ? `unknown property (also ${names.slice(1).join(', ')})` : 'unknown property');
      }
      check(query, 'query', 0);
    }
    check(request.params, 'params', 0);
    for (const name of propertiesOf(request.routeOptions.schema?.headers)) check(request.headers[name], `headers.${name}`, 0);
    if (declaresBody(request)) {
      const bodySchema = request.routeOptions.schema?.body;
      check(request.body, 'body', 0, typeof bodySchema === 'object' && bodySchema !== null ? capsOf(bodySchema) : undefined);
    }
  } catch (error) {
    done(error instanceof Error ? error : new Error(String(error)));
    return;
  }
  done();
}

/**
 * onRoute hook: a declared route (it has a response schema) without a body accepts only a small one (Fastify
 * refuses larger as 413 while reading). Routes without schemas (MCP transport, provider callbacks) keep theirs.
 */
export function applyRouteLimits(route: RouteOptions): void {
  const schema = route.schema;
  if (route.bodyLimit !== undefined || !schema || schema.body !== undefined) return;
  if (schema.response !== undefined) route.bodyLimit = INPUT_LIMITS.bodylessBytes;
}
