import type { Actor } from '../context.js';
import type { Queryable } from '../db/driver.js';
import { DomainError, invalid, notFound } from '../errors.js';
import { propertyRepo } from '../tenants/repo.js';
import type { CreatedBy } from './repo.js';
import type { TaskName } from '../jobs/tasks.js';

/** Largest upload once decoded (assets and file sources); the route's body limit leaves room for base64. */
export const MAX_UPLOAD_BYTES = 10 * 1024 * 1024;
/** Request body limit of the routes that take uploads: 10 MB of bytes is about 13.4 MB of base64. */
export const UPLOAD_BODY_LIMIT = 15 * 1024 * 1024;

export const TASK_INGEST = 'knowledge.ingest' satisfies TaskName;
export const TASK_VALIDATE_ASSET = 'knowledge.validate-asset' satisfies TaskName;

/** How an item records its creator: the acting key or operator by id and name; the admin API and the system by role. */
export function createdByOf(actor: Actor): CreatedBy {
  return { id: actor.id ?? actor.type, displayName: actor.name.slice(0, 160) };
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes base64 (whitespace allowed), refusing anything else; over MAX_UPLOAD_BYTES is 413. */
export function decodeUpload(path: string, value: string): Buffer {
  const compact = value.replace(/\s+/g, '');
  if (compact.length % 4 === 1 || !BASE64.test(compact)) throw invalid(path, 'must be base64');
  if (Math.floor((compact.length * 3) / 4) > MAX_UPLOAD_BYTES + 2) {
    throw new DomainError('M2M_PAYLOAD_TOO_LARGE', `the file is larger than ${MAX_UPLOAD_BYTES} bytes`, { maxBytes: MAX_UPLOAD_BYTES });
  }
  const bytes = Buffer.from(compact, 'base64');
  if (bytes.length > MAX_UPLOAD_BYTES) {
    throw new DomainError('M2M_PAYLOAD_TOO_LARGE', `the file is larger than ${MAX_UPLOAD_BYTES} bytes`, { maxBytes: MAX_UPLOAD_BYTES });
  }
  if (bytes.length === 0) throw invalid(path, 'must not be empty');
  return bytes;
}

/** A property of the tenant, or 404 (another tenant's property looks exactly like a missing one). */
export async function requireProperty(db: Queryable, tenantId: string, propertyId: string): Promise<void> {
  if (!(await propertyRepo.get(db, tenantId, propertyId))) throw notFound('property');
}

/** scope + propertyId → the property id (null = global). scope property needs a propertyId; global refuses one. */
export function resolveScope(input: { scope?: 'global' | 'property'; propertyId?: string }): string | null {
  if (input.scope === 'global' && input.propertyId !== undefined) throw invalid('body.propertyId', 'must be absent when scope is global');
  if (input.scope === 'property' && input.propertyId === undefined) throw invalid('body.propertyId', 'is required when scope is property');
  return input.propertyId ?? null;
}

/** LIKE pattern matching `query` anywhere, with LIKE's wildcards in the query taken literally. */
export function containsPattern(query: string): string {
  return `%${query.toLowerCase().replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
}

export function blobKey(tenantId: string, sourceId: string): string {
  return `${tenantId}/${sourceId}`;
}

/** A keyset position read back from a signed cursor: `{at, id}` with `at` a timestamp, else M2M_INVALID_CURSOR. */
export function keysetPosition(value: unknown): { at: string; id: string } {
  const p = value as { at?: unknown; id?: unknown } | null;
  if (!p || typeof p.at !== 'string' || typeof p.id !== 'string' || Number.isNaN(Date.parse(p.at))) {
    throw new DomainError('M2M_INVALID_CURSOR', 'cursor is invalid; copy nextCursor from the previous response and keep the same filters');
  }
  return { at: p.at, id: p.id };
}
