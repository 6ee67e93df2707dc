import { statusOf, type ErrorCode } from '../errors.js';
import type { KnownError, Operation } from '../operations/define.js';

/** One named example of an error answer, as OpenAPI's `examples` map holds it. */
export interface ErrorExample {
  name: string;
  summary: string;
  value: { error: { code: ErrorCode; message: string; details: Record<string, unknown> } };
}

/** What a 404 names for a path parameter (the services' `notFound(…)` words); others are spelled out from their name. */
const PATH_NOUNS: Record<string, string> = {
  subscriptionId: 'webhook subscription',
  deliveryId: 'webhook delivery',
  requestEventId: 'message request',
  followUpId: 'follow-up',
  folderId: 'asset folder',
  sourceId: 'asset',
  jobId: 'crawl job',
};

/** Query and body fields that name a record the operation looks up (a foreign one is 404 like a missing one). */
const REFERENCE_NOUNS: Record<string, string> = {
  channelId: 'channel',
  conversationId: 'conversation',
  leadId: 'lead',
  owner: 'operator',
  operatorId: 'operator',
  assignedOperatorId: 'operator',
  integrationId: 'integration',
  propertyId: 'property',
  propertyFilter: 'property',
  websiteId: 'website',
  folderId: 'asset folder',
};

/** `[field, noun]` of every record an operation names: path parameters first, then the query's and body's references. */
function references(operation: Operation): Array<[string, string]> {
  const out = new Map<string, string>();
  for (const field of Object.keys(operation.params.properties)) out.set(field, PATH_NOUNS[field] ?? field.replace(/Id$/, '').replace(/[A-Z]/g, (letter) => ` ${letter.toLowerCase()}`));
  for (const part of [operation.query, operation.body]) {
    for (const field of Object.keys(part?.properties ?? {})) {
      const noun = REFERENCE_NOUNS[field];
      if (noun && !out.has(field)) out.set(field, noun);
    }
  }
  return [...out];
}

function example(name: string, summary: string, code: ErrorCode, message: string, details: Record<string, unknown> = {}): ErrorExample {
  return { name, summary, value: { error: { code, message, details } } };
}

function validationExamples(operation: Operation): ErrorExample[] {
  const out = [example('unknownProperty', 'An unknown query parameter', 'M2M_INVALID_REQUEST', 'query.colour: unknown property', { issues: [{ path: 'query.colour', message: 'unknown property' }] })];
  for (const [where, part] of [['query', operation.query], ['body', operation.body]] as const) {
    const required = part?.required;
    const first = Array.isArray(required) ? required.find((name): name is string => typeof name === 'string') : undefined;
    if (first) out.unshift(example(`missing${where === 'body' ? 'Body' : 'Query'}Field`, `${where}.${first} missing`, 'M2M_INVALID_REQUEST', `${where}.${first}: is required`, { issues: [{ path: `${where}.${first}`, message: 'is required' }] }));
  }
  if (operation.idempotency?.key === 'required') {
    out.push(example('missingIdempotencyKey', 'No Idempotency-Key header', 'M2M_INVALID_REQUEST', "headers.idempotency-key: is required", { issues: [{ path: 'headers.idempotency-key', message: 'is required' }] }));
  }
  const listed = [operation.query, operation.body].some((part) => part !== undefined && 'cursor' in part.properties);
  if (listed) out.push(example('invalidCursor', 'A cursor that was changed or sent with other filters', 'M2M_INVALID_CURSOR', 'cursor is invalid; copy nextCursor from the previous response and keep the same filters'));
  return out;
}

function fromKnown(error: KnownError, index: number): ErrorExample {
  const details = { ...(error.reason ? { reason: error.reason } : {}), ...error.details };
  return example(error.reason ? camel(error.reason) : `${camel(error.code.replace(/^M2M_/, '').toLowerCase())}${index}`, error.reason ?? error.message, error.code, error.message, details);
}

function camel(snake: string): string {
  return snake.replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase());
}

/**
 * Every error an operation answers, by status, as examples of real answers: the ones every operation shares
 * (401, 403 naming its scopes, 415, 429), validation (400), a 404 for each record it names, 409 for its
 * Idempotency-Key, and before them the errors of its own causes as it declares them (`errors` in its declaration).
 */
export function errorExamples(operation: Operation): Map<number, ErrorExample[]> {
  const byStatus = new Map<number, ErrorExample[]>();
  const add = (status: number, item: ErrorExample) => byStatus.set(status, [...(byStatus.get(status) ?? []), item]);
  // The operation's own causes first: the page shows a status's first example unless another is chosen.
  operation.knownErrors.forEach((error, index) => add(error.status, fromKnown(error, index)));
  for (const item of validationExamples(operation)) add(statusOf[item.value.error.code], item);
  add(401, example('missingCredentials', 'No Authorization header', 'M2M_AUTH_MISSING_CREDENTIALS', 'send the API key as "Authorization: Bearer <API_KEY>"'));
  add(401, example('invalidCredentials', 'An unknown, revoked or expired key', 'M2M_AUTH_INVALID_CREDENTIALS', 'the API key is unknown, revoked or expired'));
  const scopes = [...operation.scopes];
  add(403, example('insufficientScope', `The key lacks ${scopes.join(operation.scopeMode === 'any' ? ' or ' : ' and ')}`, 'M2M_AUTH_INSUFFICIENT_SCOPE', `the credential lacks the required scope: ${scopes.join(', ')}`, { requiredScopes: scopes, missingScopes: scopes }));
  if (operation.body) add(415, example('unsupportedMediaType', 'A body that is not JSON', 'M2M_UNSUPPORTED_MEDIA_TYPE', 'send request bodies as application/json'));
  add(429, example('rateLimited', 'Too many requests for this key', 'M2M_RATE_LIMITED', 'too many requests for this API key; retry after the Retry-After delay', { retryAfterSeconds: 1 }));
  // An operation that declares its own 404 (a noun the path parameter's name would get wrong) documents that one.
  if (operation.errors.includes(404) && !operation.knownErrors.some((error) => error.status === 404)) {
    for (const [field, noun] of references(operation)) add(404, example(`${field}NotFound`, `Unknown or another business's ${field}`, 'M2M_NOT_FOUND', `${noun} not found`));
  }
  if (operation.idempotency) {
    add(409, example('idempotencyKeyReused', 'The same Idempotency-Key with a different request', 'M2M_IDEMPOTENCY_CONFLICT', 'Idempotency-Key was already used with a different request', { idempotencyKey: 'a3f1c2d4-send-1' }));
    add(409, example('idempotencyKeyInFlight', 'A retry while the first request still runs', 'M2M_IDEMPOTENCY_CONFLICT', 'a request with this Idempotency-Key is still being processed; retry later', { idempotencyKey: 'a3f1c2d4-send-1' }));
  }
  return byStatus;
}
