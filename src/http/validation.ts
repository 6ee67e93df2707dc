import { Ajv, type Options, type ValidateFunction } from 'ajv';
import * as formats from 'ajv-formats';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import { isAcceptedDate, isAcceptedDateTime } from './input-guard.js';

// ajv-formats ships CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = (formats as unknown as { default: formats.FormatsPlugin }).default;

const shared: Options = { removeAdditional: false, allErrors: true, useDefaults: true, strict: false };

/** An Ajv instance with the project's options and string formats (request validation, MCP tool input). */
export function buildAjv(options: Options): Ajv {
  const ajv = new Ajv({ ...shared, ...options });
  addFormats(ajv);
  // One range for every date-time and date input, whatever schema declares it (see input-guard.ts).
  ajv.addFormat('date-time', { type: 'string', validate: isAcceptedDateTime });
  ajv.addFormat('date', { type: 'string', validate: isAcceptedDate });
  ajv.addKeyword({
    keyword: UNSUPPORTED_VALUES,
    type: 'string',
    schemaType: 'object',
    errors: true,
    validate: refuseUnsupported,
  });
  return ajv;
}

/**
 * `x-unsupported: {value: message}` on a string schema: values a caller may well try (`owner=mine`) that the
 * schema does not offer, refused with a message saying why rather than "must match pattern". The issue mapper
 * reports only this message for the value (edge-errors.ts).
 */
export const UNSUPPORTED_VALUES = 'x-unsupported';

function refuseUnsupported(this: unknown, schema: Record<string, string>, data: string): boolean {
  const message = Object.hasOwn(schema, data) ? schema[data] : undefined;
  if (message === undefined) return true;
  refuseUnsupported.errors = [{ keyword: UNSUPPORTED_VALUES, message, params: {} }];
  return false;
}
refuseUnsupported.errors = [] as Array<{ keyword: string; message: string; params: Record<string, never> }>;

/**
 * Request validation. Query strings, path parameters and headers arrive as text, so they are coerced
 * (`limit=5` → 5). JSON bodies are typed already and are never coerced: `"url": 42` is an error, not "42".
 * Unknown properties are reported, never silently removed.
 */
export function validatorCompiler(): FastifySchemaCompiler<FastifySchema> {
  const body = buildAjv({ coerceTypes: false });
  const text = buildAjv({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => lazyValidator(httpPart === 'body' ? body : text, schema as object);
}

type LazyValidate = ((data: unknown) => boolean) & { errors?: ValidateFunction['errors'] };

/**
 * Compiled on the first request that needs it: a start compiles no route's schemas, and a route a deployment
 * never calls is never compiled.
 */
function lazyValidator(ajv: Ajv, schema: object): LazyValidate {
  let compiled: ValidateFunction | undefined;
  const validate: LazyValidate = (data) => {
    compiled ??= ajv.compile(schema);
    const valid = compiled(data);
    validate.errors = compiled.errors;
    return valid;
  };
  return validate;
}
