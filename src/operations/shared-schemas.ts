import type { TSchema } from 'typebox';
import { channelSharedSchemas } from '../channels/schema.js';
import { conversationSharedSchemas } from '../conversations/schema.js';
import { contactSharedSchemas } from '../conversations/contact-schema.js';
import { messageSharedSchemas } from '../conversations/message-schema.js';
import { crmSharedSchemas, salesSharedSchemas } from '../crm/schema.js';
import { eventSharedSchemas } from '../events/schema.js';
import { ErrorBody } from '../http/schemas.js';
import { crawlSharedSchemas } from '../knowledge/crawler/schema.js';
import { knowledgeSharedSchemas } from '../knowledge/schema.js';
import { webhookSharedSchemas } from '../webhooks/schema.js';

/** Schemas with an `$id`, added once at the root of the app and referenced from responses. */
export const SHARED_SCHEMAS: readonly TSchema[] = [ErrorBody, ...webhookSharedSchemas, ...eventSharedSchemas, ...conversationSharedSchemas, ...messageSharedSchemas, ...crmSharedSchemas, ...knowledgeSharedSchemas, ...crawlSharedSchemas, ...channelSharedSchemas, ...contactSharedSchemas, ...salesSharedSchemas];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

let cachedById: Map<string, Json> | undefined;

/** The shared schemas by `$id`, as plain JSON (built once). */
function byId(): Map<string, Json> {
  if (cachedById) return cachedById;
  const map = new Map<string, Json>();
  for (const schema of SHARED_SCHEMAS) {
    const json: Json = JSON.parse(JSON.stringify(schema));
    if (json && typeof json === 'object' && !Array.isArray(json) && typeof json.$id === 'string') map.set(json.$id, json);
  }
  cachedById = map;
  return map;
}

/**
 * A self-contained copy of a schema: every `$ref` to a shared schema replaced by the schema itself (without its
 * `$id`). MCP clients and the SDK generator read schemas on their own, without the app's shared definitions.
 */
export function dereference(schema: unknown): Json {
  const shared = byId();
  const walk = (node: Json): Json => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    if (typeof node.$ref === 'string') {
      const target = shared.get(node.$ref.replace(/#$/, ''));
      if (!target) throw new Error(`unknown schema reference ${node.$ref}`);
      return walk(target);
    }
    const out: { [key: string]: Json } = {};
    for (const [key, value] of Object.entries(node)) if (key !== '$id') out[key] = walk(value);
    return out;
  };
  return walk(JSON.parse(JSON.stringify(schema)));
}
