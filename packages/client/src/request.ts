/**
 * The single HTTP core of the client: every resource method goes through `request()`.
 *
 * - base URL ending in `/m2m/v1`, bearer API key, JSON in and out;
 * - per-attempt timeout through an AbortSignal (default 30 s), combinable with a caller's signal;
 * - retries of 429 / 5xx / network errors / timeouts with exponential backoff and jitter
 *   (default 2 retries), honouring `Retry-After`;
 * - an `Idempotency-Key` (crypto.randomUUID()) generated once per call for POST requests marked
 *   idempotent, and reused across the retries of that call;
 * - errors surfaced as `ApiError` parsed from `{error: {code, message, details}}`.
 *
 * Which requests are retried: a 429 means the server did not act on the request, so it is always
 * retried. A 5xx, a dropped connection or a timeout may mean the server DID act; those are retried
 * only for requests that are safe to repeat: GET/HEAD/PUT/DELETE/PATCH (they set state rather than
 * add it), and POST requests marked `idempotent` (which carry an Idempotency-Key).
 */
import { randomUUID } from 'node:crypto';

export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** Bearer API key (e.g. `m2m_live_…`). */
  apiKey: string;
  /** Base URL of the API including the version prefix, e.g. `https://api.example.com/m2m/v1`. */
  baseUrl: string;
  /** Injectable fetch implementation; defaults to the global `fetch`. */
  fetch?: FetchLike;
  /** Timeout of each attempt in milliseconds (default 30 000). */
  timeoutMs?: number;
  /** How many times a failed attempt is retried (default 2, so at most 3 attempts). */
  maxRetries?: number;
  /** First backoff delay in milliseconds before jitter (default 500); doubles on each retry. */
  retryBaseDelayMs?: number;
  /** Upper bound of a computed backoff delay in milliseconds (default 8 000). */
  retryMaxDelayMs?: number;
  /** Longest `Retry-After` the client is willing to wait in milliseconds (default 60 000); longer → no retry. */
  maxRetryAfterMs?: number;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
}

export interface ResolvedClientConfig {
  apiKey: string;
  baseUrl: string;
  fetch: FetchLike;
  timeoutMs: number;
  maxRetries: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  maxRetryAfterMs: number;
  headers: Record<string, string>;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD';

export type QueryValue = string | number | boolean | null | undefined;

/** Per-call options accepted by every resource method. */
export interface CallOptions {
  /** Aborts the call (including pending retries). */
  signal?: AbortSignal;
  /** Overrides the client's per-attempt timeout for this call. */
  timeoutMs?: number;
  /** Overrides the client's retry count for this call. */
  maxRetries?: number;
  /** Explicit Idempotency-Key (1..255 characters); marks the call as safe to retry. */
  idempotencyKey?: string;
  /** Extra headers for this call. */
  headers?: Record<string, string>;
}

export interface RequestOptions extends CallOptions {
  method: HttpMethod;
  /** Path below the base URL, starting with `/`; build it with `path\`…\`` so segments are encoded. */
  path: string;
  query?: Record<string, QueryValue>;
  body?: unknown;
  /**
   * POST only: the operation is safe to repeat. The client then generates an Idempotency-Key
   * (unless `idempotencyKey` is given), sends it on every attempt of this call, and retries
   * 5xx / network errors / timeouts. Non-POST methods are treated as idempotent already.
   */
  idempotent?: boolean;
  /** `bytes`: the success body is raw bytes (a media download), returned as a Uint8Array instead of parsed JSON. */
  responseType?: 'json' | 'bytes';
}

const DEFAULTS = {
  timeoutMs: 30_000,
  maxRetries: 2,
  retryBaseDelayMs: 500,
  retryMaxDelayMs: 8_000,
  maxRetryAfterMs: 60_000,
} as const;

const USER_AGENT = 'm2m-client-ts/0.1.0';

/** An error response of the API (`{error: {code, message, details}}`), or an unusable response. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  /** HTTP status code. */
  readonly status: number;
  /** Machine-readable code, e.g. `M2M_NOT_FOUND`; `M2M_CLIENT_UNEXPECTED_RESPONSE` when the body was not an error envelope. */
  readonly code: string;
  /** `error.details` of the envelope (e.g. `{requiredScopes, missingScopes}` or `{issues}`), `undefined` when absent. */
  readonly details: unknown;
  /** Value of the `X-Request-Id` response header, to quote when contacting support. */
  readonly requestId: string | undefined;
  /** Response headers (e.g. `Retry-After`, `RateLimit-*`). */
  readonly headers: Headers;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    details?: unknown;
    requestId?: string;
    headers?: Headers;
  }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.requestId = init.requestId;
    this.headers = init.headers ?? new Headers();
  }
}

/** The request never produced an HTTP response (DNS failure, connection refused/reset, …). */
export class ApiConnectionError extends Error {
  override readonly name: string = 'ApiConnectionError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** An attempt did not complete (headers and body) within the timeout. */
export class ApiTimeoutError extends ApiConnectionError {
  override readonly name: string = 'ApiTimeoutError';
  readonly timeoutMs: number;
  constructor(message: string, timeoutMs: number, options?: { cause?: unknown }) {
    super(message, options);
    this.timeoutMs = timeoutMs;
  }
}

function nonNegativeInteger(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0) {
    throw new TypeError(`${name} must be a non-negative integer, got ${String(value)}`);
  }
  return value;
}

function positiveInteger(value: number | undefined, fallback: number, name: string): number {
  const v = nonNegativeInteger(value, fallback, name);
  if (v === 0) throw new TypeError(`${name} must be greater than 0`);
  return v;
}

export function resolveConfig(options: ClientOptions): ResolvedClientConfig {
  if (!options || typeof options.apiKey !== 'string' || options.apiKey.trim() === '') {
    throw new TypeError('apiKey is required');
  }
  if (typeof options.baseUrl !== 'string' || options.baseUrl === '') {
    throw new TypeError('baseUrl is required, e.g. "https://api.example.com/m2m/v1"');
  }
  let url: URL;
  try {
    url = new URL(options.baseUrl);
  } catch {
    throw new TypeError(`baseUrl is not a valid URL: ${options.baseUrl}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new TypeError(`baseUrl must be http(s), got ${url.protocol}`);
  }
  if (url.search || url.hash) throw new TypeError('baseUrl must not carry a query string or fragment');
  const pathname = url.pathname.replace(/\/+$/, '');
  if (!pathname.endsWith('/m2m/v1')) {
    throw new TypeError(`baseUrl must end with /m2m/v1 (the API version prefix), got ${options.baseUrl}`);
  }
  const fetchImpl = options.fetch ?? (globalThis.fetch as FetchLike | undefined);
  if (typeof fetchImpl !== 'function') {
    throw new TypeError('No fetch implementation: pass options.fetch or use Node.js >= 18');
  }
  return {
    apiKey: options.apiKey,
    baseUrl: `${url.origin}${pathname}`,
    fetch: fetchImpl,
    timeoutMs: positiveInteger(options.timeoutMs, DEFAULTS.timeoutMs, 'timeoutMs'),
    maxRetries: nonNegativeInteger(options.maxRetries, DEFAULTS.maxRetries, 'maxRetries'),
    retryBaseDelayMs: nonNegativeInteger(options.retryBaseDelayMs, DEFAULTS.retryBaseDelayMs, 'retryBaseDelayMs'),
    retryMaxDelayMs: nonNegativeInteger(options.retryMaxDelayMs, DEFAULTS.retryMaxDelayMs, 'retryMaxDelayMs'),
    maxRetryAfterMs: nonNegativeInteger(options.maxRetryAfterMs, DEFAULTS.maxRetryAfterMs, 'maxRetryAfterMs'),
    headers: { ...(options.headers ?? {}) },
  };
}

/**
 * Encodes one path segment. Rejects empty, "." and ".." segments: URL parsers would otherwise
 * collapse them (`/webhooks/..` → `/`), sending the request to a different endpoint.
 */
export function encodeSegment(value: string, name = 'id'): string {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name} must be a non-empty string`);
  if (value === '.' || value === '..') throw new TypeError(`${name} must not be "." or ".."`);
  return encodeURIComponent(value);
}

/** Tagged template that URL-encodes every interpolated value as a path segment. */
export function path(strings: TemplateStringsArray, ...values: string[]): string {
  let out = strings[0];
  values.forEach((v, i) => {
    out += encodeSegment(v) + strings[i + 1];
  });
  return out;
}

function buildUrl(baseUrl: string, p: string, query?: Record<string, QueryValue>): string {
  if (!p.startsWith('/')) throw new TypeError(`path must start with "/", got ${p}`);
  let url = baseUrl + p;
  if (query) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value === undefined || value === null) continue;
      params.append(key, String(value));
    }
    const qs = params.toString();
    if (qs) url += `?${qs}`;
  }
  return url;
}

/** Parses `Retry-After` (delta-seconds or HTTP-date) into milliseconds; undefined when absent/invalid. */
export function parseRetryAfter(value: string | null, nowMs = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.ceil(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}

/** Exponential backoff with jitter: a random delay in [d/2, d], d = min(max, base·2^retry). */
function backoffDelay(retry: number, config: ResolvedClientConfig): number {
  const d = Math.min(config.retryMaxDelayMs, config.retryBaseDelayMs * 2 ** retry);
  return Math.round(d / 2 + Math.random() * (d / 2));
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function toApiError(status: number, text: string, headers: Headers): ApiError {
  const requestId = headers.get('x-request-id') ?? undefined;
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const envelope = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined;
  if (envelope && typeof envelope.code === 'string') {
    return new ApiError({
      status,
      code: envelope.code,
      message: typeof envelope.message === 'string' && envelope.message ? envelope.message : `HTTP ${status}`,
      details: envelope.details,
      requestId,
      headers,
    });
  }
  const snippet = text.length > 200 ? `${text.slice(0, 200)}…` : text;
  return new ApiError({
    status,
    code: 'M2M_CLIENT_UNEXPECTED_RESPONSE',
    message: `HTTP ${status} without an error envelope${snippet ? `: ${snippet}` : ''}`,
    details: undefined,
    requestId,
    headers,
  });
}

type Attempt =
  | { kind: 'response'; status: number; headers: Headers; text: string; bytes?: Uint8Array }
  | { kind: 'error'; error: ApiConnectionError };

/**
 * Sends one API call (with its retries) and returns the parsed JSON body (`undefined` for an
 * empty body, e.g. 204). Throws `ApiError` for non-2xx responses, `ApiTimeoutError` /
 * `ApiConnectionError` when no response arrived, and the signal's reason when aborted by the caller.
 */
export async function request<T>(config: ResolvedClientConfig, options: RequestOptions): Promise<T> {
  const method = options.method;
  const url = buildUrl(config.baseUrl, options.path, options.query);
  const timeoutMs = positiveInteger(options.timeoutMs, config.timeoutMs, 'timeoutMs');
  const maxRetries = nonNegativeInteger(options.maxRetries, config.maxRetries, 'maxRetries');
  const userSignal = options.signal;

  if (options.idempotencyKey !== undefined) {
    if (typeof options.idempotencyKey !== 'string' || options.idempotencyKey.length < 1 || options.idempotencyKey.length > 255) {
      throw new TypeError('idempotencyKey must be 1..255 characters');
    }
  }
  // One key per call, generated before the first attempt and reused on every retry.
  const idempotencyKey =
    options.idempotencyKey ?? (method === 'POST' && options.idempotent ? randomUUID() : undefined);
  const safeToRepeat = method !== 'POST' || idempotencyKey !== undefined;

  const headers: Record<string, string> = {
    Accept: 'application/json',
    'User-Agent': USER_AGENT,
    ...config.headers,
    ...(options.headers ?? {}),
    Authorization: `Bearer ${config.apiKey}`,
  };
  let body: string | undefined;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] = 'application/json';
  }
  if (idempotencyKey !== undefined) headers['Idempotency-Key'] = idempotencyKey;

  for (let attempt = 0; ; attempt++) {
    const result = await attemptOnce(config, method, url, headers, body, timeoutMs, userSignal, options.responseType === 'bytes');

    if (result.kind === 'response' && result.status >= 200 && result.status < 300) {
      if (options.responseType === 'bytes') return (result.bytes ?? new Uint8Array()) as T;
      if (result.text === '') return undefined as T;
      try {
        return JSON.parse(result.text) as T;
      } catch (cause) {
        throw new ApiError({
          status: result.status,
          code: 'M2M_CLIENT_INVALID_JSON',
          message: `HTTP ${result.status} response body is not valid JSON`,
          details: { cause: String(cause) },
          requestId: result.headers.get('x-request-id') ?? undefined,
          headers: result.headers,
        });
      }
    }

    const failure: Error =
      result.kind === 'error' ? result.error : toApiError(result.status, result.text, result.headers);

    // Decide whether (and how long) to wait before another attempt.
    let delay: number | undefined;
    if (attempt < maxRetries) {
      if (result.kind === 'error') {
        if (safeToRepeat) delay = backoffDelay(attempt, config);
      } else if (result.status === 429 || (result.status >= 500 && safeToRepeat)) {
        const retryAfter =
          result.status === 429 || result.status === 503 ? parseRetryAfter(result.headers.get('retry-after')) : undefined;
        if (retryAfter === undefined) delay = backoffDelay(attempt, config);
        else if (retryAfter <= config.maxRetryAfterMs) delay = retryAfter;
        // A Retry-After longer than we are willing to wait: give the error back to the caller.
      }
    }
    if (delay === undefined) throw failure;
    await sleep(delay, userSignal);
  }
}

async function attemptOnce(
  config: ResolvedClientConfig,
  method: HttpMethod,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
  timeoutMs: number,
  userSignal: AbortSignal | undefined,
  bytes = false,
): Promise<Attempt> {
  if (userSignal?.aborted) throw userSignal.reason;
  const timeoutSignal = AbortSignal.timeout(timeoutMs);
  const signal = userSignal ? AbortSignal.any([userSignal, timeoutSignal]) : timeoutSignal;
  try {
    // The API never redirects: a 3xx is surfaced as an ApiError rather than followed (and the bearer
    // key is never replayed to another location).
    const res = await config.fetch(url, { method, headers, body, signal, redirect: 'manual' });
    // The body read is covered by the same signal, so a stalled body also times out.
    if (bytes && res.status >= 200 && res.status < 300) {
      return { kind: 'response', status: res.status, headers: res.headers, text: '', bytes: new Uint8Array(await res.arrayBuffer()) };
    }
    const text = await res.text();
    return { kind: 'response', status: res.status, headers: res.headers, text };
  } catch (cause) {
    if (userSignal?.aborted) throw userSignal.reason;
    const target = `${method} ${new URL(url).pathname}`;
    if (timeoutSignal.aborted) {
      return {
        kind: 'error',
        error: new ApiTimeoutError(`Request timed out after ${timeoutMs} ms (${target})`, timeoutMs, { cause }),
      };
    }
    const detail = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause);
    return { kind: 'error', error: new ApiConnectionError(`Request failed without a response (${target}): ${detail}`, { cause }) };
  }
}
