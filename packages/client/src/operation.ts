import { encodeSegment, request, type CallOptions, type HttpMethod, type QueryValue, type ResolvedClientConfig } from './request.js';

/** How one operation is called: written by the generator from the server's operation catalogue. */
export interface OperationMeta {
  method: HttpMethod;
  /** `/webhooks/{subscriptionId}` */
  path: string;
  pathParams: readonly string[];
  queryParams: readonly string[];
  bodyParams: readonly string[];
  /** Sends and creates: the client sets an Idempotency-Key (unless given) and reuses it on its retries. */
  idempotent: boolean;
  /** The operation answers with a body (not 204). */
  hasBody: boolean;
  /** The body is raw bytes (a media download): the method returns a Uint8Array. */
  binary?: boolean;
}

function queryValue(value: unknown): QueryValue {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value;
  return JSON.stringify(value);
}

/** Splits a method's single input object into path parameters, query and body, and sends the call. */
export async function callOperation<T>(config: ResolvedClientConfig, meta: OperationMeta, input: object, options: CallOptions = {}): Promise<T> {
  const values = new Map(Object.entries(input));
  const path = meta.path.replace(/\{([A-Za-z0-9_]+)\}/g, (_match, name: string) => {
    const value = values.get(name);
    if (typeof value !== 'string') throw new TypeError(`${name} is required (a string)`);
    return encodeSegment(value, name);
  });
  const query: Record<string, QueryValue> = {};
  for (const name of meta.queryParams) query[name] = queryValue(values.get(name));
  let body: Record<string, unknown> | undefined;
  if (meta.method !== 'GET' && meta.method !== 'DELETE') {
    body = {};
    for (const name of meta.bodyParams) if (values.get(name) !== undefined) body[name] = values.get(name);
  }
  return request<T>(config, { ...options, method: meta.method, path, query, body, idempotent: meta.idempotent, ...(meta.binary ? { responseType: 'bytes' as const } : {}) });
}

/** A page of a list operation: its items, and where the next page starts. */
export interface Page {
  nextCursor?: string;
  hasMore?: boolean;
  hasNext?: boolean;
}

/**
 * Follows `nextCursor` from page to page, yielding the items of `field`. The filters stay the same on every
 * page (the API binds the cursor to them).
 */
export async function* iterateOperation<P extends Page, K extends keyof P>(
  list: (cursor: string | undefined) => Promise<P>,
  field: K,
): AsyncGenerator<P[K] extends ReadonlyArray<infer Item> ? Item : never, void, undefined> {
  let cursor: string | undefined;
  do {
    const page = await list(cursor);
    const items = page[field];
    if (Array.isArray(items)) yield* items;
    cursor = (page.hasMore ?? page.hasNext ?? true) ? page.nextCursor : undefined;
  } while (cursor);
}
