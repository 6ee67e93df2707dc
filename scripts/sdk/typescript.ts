/** JSON Schema (as our TypeBox schemas produce it) → a TypeScript type expression. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function propertyName(name: string): string {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

function comment(schema: { [key: string]: Json }, indent: string): string {
  const text = typeof schema.description === 'string' ? schema.description : undefined;
  return text ? `${indent}/** ${text.replace(/\*\//g, '* /')} */\n` : '';
}

/**
 * Writes the type of `schema`; `refName` names a shared schema referenced by `$ref` (it becomes a named type).
 * Covers what the API's schemas use: objects, arrays, enums, const, unions, if/then/else, nullable types.
 */
export function toType(schema: Json | undefined, refName: (ref: string) => string, indent = ''): string {
  if (schema === undefined || schema === true || !isObject(schema)) return 'unknown';
  if (typeof schema.$ref === 'string') return refName(schema.$ref.replace(/#$/, ''));
  if (Array.isArray(schema.enum)) return schema.enum.map((value) => JSON.stringify(value)).join(' | ');
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key];
    if (Array.isArray(options)) return options.map((option) => toType(option, refName, indent)).join(' | ');
  }
  if (schema.if !== undefined && (schema.then !== undefined || schema.else !== undefined)) {
    return [schema.then, schema.else].filter((branch) => branch !== undefined).map((branch) => toType(branch, refName, indent)).join(' | ');
  }
  const type = schema.type;
  if (Array.isArray(type)) return type.map((one) => toType({ ...schema, type: one }, refName, indent)).join(' | ');
  switch (type) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array':
      return `Array<${toType(schema.items, refName, indent)}>`;
    case 'object': {
      const properties = isObject(schema.properties) ? schema.properties : {};
      const required = new Set(Array.isArray(schema.required) ? schema.required.filter((name): name is string => typeof name === 'string') : []);
      const inner = `${indent}  `;
      const lines = Object.entries(properties).map(([name, property]) => {
        const doc = isObject(property) ? comment(property, inner) : '';
        return `${doc}${inner}${propertyName(name)}${required.has(name) ? '' : '?'}: ${toType(property, refName, inner)};`;
      });
      const extra = schema.additionalProperties;
      const patterns = isObject(schema.patternProperties) ? Object.values(schema.patternProperties) : [];
      if (patterns.length > 0) lines.push(`${inner}[key: string]: ${patterns.map((pattern) => toType(pattern, refName, inner)).join(' | ')};`);
      else if (isObject(extra) || (extra === undefined && lines.length === 0)) {
        lines.push(`${inner}[key: string]: ${isObject(extra) ? toType(extra, refName, inner) : 'unknown'};`);
      }
      return lines.length === 0 ? 'Record<string, never>' : `{\n${lines.join('\n')}\n${indent}}`;
    }
    default:
      return 'unknown';
  }
}
