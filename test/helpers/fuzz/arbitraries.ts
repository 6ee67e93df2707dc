import fc from 'fast-check';

/** The part of JSON Schema (as OpenAPI 3.1 serves it) the generators understand; anything else yields `{}`. */
export interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Strings no careful client sends: what the database cannot store, broken Unicode, escapes, injections, extremes. */
export const hostileStrings: readonly string[] = [
  '',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '😀',
  'e\u0301',
  '%00',
  '%ff',
  '%',
  '%zz',
  '%c0%ae',
  '../../etc/passwd',
  "' OR 1=1 --",
  '$1',
  '<script>alert(1)</script>',
  '\\',
  ' ',
  '\r\n',
  'a'.repeat(5000),
  '0000-01-01T00:00:00Z',
  '9999-12-31T23:59:59Z',
  '2024-06-30T23:59:60Z',
  '-1',
  '1e400',
  'NaN',
  'null',
  'true',
  '[]',
  '{}',
];

/** Any UTF-16 code unit, so unpaired surrogates and NUL come up as well as ordinary text. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n));
export const anyText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: codeUnit, maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom(...hostileStrings),
);

export const anyJson: fc.Arbitrary<Json> = fc.jsonValue({ maxDepth: 3 }).map((value) => value as Json);

function refName(ref: string): string {
  return ref.slice(ref.lastIndexOf('/') + 1);
}

function formatted(format: string): fc.Arbitrary<string> | undefined {
  switch (format) {
    case 'date-time':
      return fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
    case 'date':
      return fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));
    case 'email':
      return fc.emailAddress();
    case 'uri':
    case 'url':
      return fc.webUrl();
  }
  return undefined;
}

function stringOf(schema: JsonSchema): fc.Arbitrary<string> {
  const byFormat = schema.format ? formatted(schema.format) : undefined;
  if (byFormat) return byFormat;
  if (schema.pattern) return fc.stringMatching(new RegExp(schema.pattern));
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.min(schema.maxLength ?? 40, Math.max(minLength, 40));
  return fc.string({ minLength, maxLength });
}

/**
 * Values that satisfy `schema` (mostly: patterns and formats are approximated). `components` resolves
 * `$ref`; `depth` stops recursive schemas.
 */
export function valid(schema: JsonSchema, components: Record<string, JsonSchema>, depth = 0): fc.Arbitrary<Json> {
  if (schema.$ref) return valid(components[refName(schema.$ref)] ?? {}, components, depth);
  if (schema.const !== undefined) return fc.constant(schema.const as Json);
  if (schema.enum) return fc.constantFrom(...(schema.enum as Json[]));
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return fc.oneof(...alternatives.map((s) => valid(s, components, depth)));
  if (schema.allOf) return valid(Object.assign({}, ...schema.allOf), components, depth);
  const type = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (type.length > 1) return fc.oneof(...type.map((t) => valid({ ...schema, type: t }, components, depth)));
  switch (type[0]) {
    case 'string':
      return stringOf(schema);
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1_000_000 });
    case 'number':
      return fc.double({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1_000_000, noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      if (depth > 4) return fc.constant([]);
      const minLength = schema.minItems ?? 0;
      return fc.array(valid(schema.items ?? {}, components, depth + 1), { minLength, maxLength: Math.min(schema.maxItems ?? 3, minLength + 3) });
    }
    case 'object':
      return objectOf(schema, components, depth);
  }
  return depth > 4 ? fc.constant(null) : anyJson;
}

function objectOf(schema: JsonSchema, components: Record<string, JsonSchema>, depth: number): fc.Arbitrary<Json> {
  const properties = schema.properties ?? {};
  if (depth > 4 || Object.keys(properties).length === 0) return fc.constant({});
  const required = schema.required ?? [];
  const model: Record<string, fc.Arbitrary<Json>> = {};
  for (const [name, property] of Object.entries(properties)) model[name] = valid(property, components, depth + 1);
  return fc.record(model, { requiredKeys: required.filter((name) => name in properties) }).map((value) => value as Json);
}

/**
 * A value for `schema` that a hostile or careless client sends: a wrong type, a hostile string, a value past
 * its bounds, an unknown property, or a valid object with one field replaced.
 */
export function invalid(schema: JsonSchema, components: Record<string, JsonSchema>): fc.Arbitrary<Json> {
  const resolved = schema.$ref ? (components[refName(schema.$ref)] ?? {}) : schema;
  const options: Array<fc.Arbitrary<Json>> = [anyJson, anyText, fc.constantFrom<Json>(null, [], {}, 0, -1, 1e308, true, 'x'.repeat(100_000))];
  if (resolved.type === 'object' && resolved.properties) {
    const names = Object.keys(resolved.properties);
    const base = valid(resolved, components);
    options.push(
      fc.tuple(base, fc.constantFrom(...names), fc.oneof(anyText, anyJson)).map(([value, name, replacement]) => ({ ...(value as Record<string, Json>), [name]: replacement })),
      fc.tuple(base, anyText, anyJson).map(([value, name, extra]) => ({ ...(value as Record<string, Json>), [name || 'extra']: extra })),
      fc.tuple(base, fc.integer({ min: 33, max: 3000 })).map(([value, depth]) => {
        let nested: Json = 'deep';
        for (let i = 0; i < depth; i += 1) nested = [nested];
        return { ...(value as Record<string, Json>), [names[0]]: nested };
      }),
    );
  }
  return fc.oneof(...options);
}
