import { Type, type Static, type TSchema } from 'typebox';

/** The error envelope every non-2xx response uses. */
export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Record(Type.String(), Type.Unknown()),
    }),
  },
  { $id: 'ErrorBody', description: 'Error envelope' },
);

const errorRef = Type.Ref('ErrorBody');

/** Error responses documented on every authenticated route. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  const out: Record<number, TSchema> = {};
  for (const status of [400, 401, 403, 429, ...statuses]) out[status] = errorRef;
  return out;
}

export const DateTime = Type.String({ format: 'date-time' });

/** An object schema that rejects unknown properties (request bodies and query strings). */
export const Strict = { additionalProperties: false } as const;

export function nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

/** A string enum as JSON Schema `enum` (clear "must be one of …" errors), typed as the union of its values. */
export function StringEnum<const T extends readonly string[]>(values: T, options: Record<string, unknown> = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

/**
 * A reference to a shared schema (one with an `$id`, added once at the root), typed as the schema it names:
 * responses serialize through `$ref` while handlers are checked against the referenced shape.
 */
export function Ref<T extends TSchema>(schema: T) {
  const id = (schema as { $id?: unknown }).$id;
  if (typeof id !== 'string') throw new Error('Ref() needs a schema with an $id');
  return Type.Unsafe<Static<T>>(Type.Ref(id));
}
