import { Readable } from 'node:stream';
import type * as Undici from 'undici';
import { Type } from 'typebox';
import { classifyNetError } from '../../../net/failure.js';
import { loadUndici } from '../../../net/undici.js';
import { cutText } from '../../../util/text.js';
import { ChannelSendError } from '../types.js';
import { lazyCheck } from './payload-schemas.js';

export const DEFAULT_GRAPH_BASE_URL = 'https://graph.facebook.com';
export const DEFAULT_GRAPH_API_VERSION = 'v23.0';
const DEFAULT_TIMEOUT_MS = 15_000;

export interface GraphClientOptions {
  /** META_GRAPH_BASE_URL (the fake Graph API in tests and `m2m dev`). */
  baseUrl?: string;
  /** META_GRAPH_API_VERSION. */
  apiVersion?: string;
  /** Per call: connect, first byte and idle body time. */
  timeoutMs?: number;
  /** An undici dispatcher (connection pool, the SSRF-guarded agent for attachment URLs); undici's global one otherwise. */
  dispatcher?: Undici.Dispatcher;
}

/**
 * Which product a call belongs to, for the error code: WhatsApp errors are `whatsapp_<code>` (decisions 7.1),
 * Messenger and Instagram errors `meta_<code>`.
 */
export type GraphFamily = 'whatsapp' | 'meta';

/** A Graph API refusal or failure; `graphCode`/`subcode`/`fbtraceId` are Meta's when it answered its envelope. */
export class GraphError extends ChannelSendError {
  constructor(
    code: string,
    message: string,
    flags: { retryable: boolean; mayHaveBeenSent?: boolean; closesWindow?: boolean },
    readonly details: { httpStatus?: number; graphCode?: number; subcode?: number; type?: string; fbtraceId?: string } = {},
  ) {
    super(code, message, flags);
    this.name = 'GraphError';
  }

  /** Meta refused the token (190) or the permission (10, 200): the channel's connection is failing. */
  get authFailed(): boolean {
    const c = this.details.graphCode;
    return c === 190 || (c === 10 && this.details.subcode !== WINDOW_SUBCODE) || (c !== undefined && c >= 200 && c <= 299);
  }
}

/**
 * Codes worth retrying after a pause: throttling (4 app, 80007 WhatsApp account, 613 calls, 130429 throughput,
 * 131056 pair rate) and Meta's own "temporary" codes 1 and 2. Everything else is a refusal a retry repeats.
 */
const RETRYABLE_CODES = new Set([1, 2, 4, 613, 80007, 130429, 131056]);
/** WhatsApp: more than 24 hours since the guest's last message. */
const REENGAGEMENT_CODE = 131047;
/** Messenger/Instagram: code 10 with this subcode, sent outside the allowed window. */
const WINDOW_SUBCODE = 2018278;

const GraphErrorEnvelope = Type.Object({
  error: Type.Object({
    message: Type.Optional(Type.String()),
    type: Type.Optional(Type.String()),
    code: Type.Optional(Type.Integer()),
    error_subcode: Type.Optional(Type.Integer()),
    error_user_msg: Type.Optional(Type.String()),
    error_data: Type.Optional(Type.Unknown()),
    fbtrace_id: Type.Optional(Type.String()),
  }),
});
const isGraphErrorEnvelope = lazyCheck(GraphErrorEnvelope);
const ErrorDetails = Type.Object({ details: Type.String() });
const hasErrorDetails = lazyCheck(ErrorDetails);

export type FormValue = string | { bytes: Uint8Array; contentType: string; filename: string };

export interface GraphCall<T> {
  method: 'GET' | 'POST' | 'DELETE';
  /** Path after the version, e.g. `/106540352242922/messages`. */
  path: string;
  token: string;
  family: GraphFamily;
  query?: Record<string, string>;
  json?: unknown;
  /** multipart/form-data fields, in order. */
  form?: Array<[string, FormValue]>;
  signal: AbortSignal;
  /** The answer's expected shape: a 2xx answer that fails it is `provider_bad_response`. */
  accept: (value: unknown) => value is T;
  /** The call creates a message: a timeout or a 2xx without a usable answer may mean it is out already. */
  sends?: boolean;
}

/** Media bytes on their way: `body` ends with a `MediaDownloadError` if the cap is passed mid-stream. */
export interface MediaDownload {
  contentType: string;
  sizeBytes?: number;
  body: Readable;
}

export type MediaFailureReason = 'too_large' | 'content_type' | 'not_found' | 'http_error' | 'unreachable' | 'timeout';

/** Why media could not be fetched; the message keeps `media.status: failed` with this reason. */
export class MediaDownloadError extends Error {
  constructor(
    readonly reason: MediaFailureReason,
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'MediaDownloadError';
  }
}

export interface DownloadOptions {
  /** The bearer token (WhatsApp media URLs need it; Messenger/Instagram CDN URLs are signed and do not). */
  token?: string;
  maxBytes: number;
  /** The type the callback announced: an answer of another type is refused (`application/octet-stream` is taken as it). */
  expectedContentType?: string;
  signal: AbortSignal;
  /** Redirects followed (0 when absent). */
  maxRedirects?: number;
  /** This download's dispatcher (the SSRF-guarded agent for URLs a callback named); the client's otherwise. */
  dispatcher?: Undici.Dispatcher;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Types that are never media: error pages of an expired or wrong URL. */
const NOT_MEDIA = new Set(['text/html', 'application/json', 'text/javascript']);

/** The Graph API over undici: versioned URLs, bearer tokens, JSON and multipart, Meta's errors typed. */
export class GraphClient {
  readonly baseUrl: string;
  readonly apiVersion: string;
  private readonly timeoutMs: number;

  constructor(private readonly options: GraphClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_GRAPH_BASE_URL).replace(/\/+$/, '');
    this.apiVersion = options.apiVersion ?? DEFAULT_GRAPH_API_VERSION;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  url(path: string, query?: Record<string, string>): string {
    const url = new URL(`${this.baseUrl}/${this.apiVersion}${path}`);
    for (const [key, value] of Object.entries(query ?? {})) url.searchParams.set(key, value);
    return url.toString();
  }

  /** One Graph API call; resolves with the answer when it is 2xx and has the expected shape, else throws `GraphError`. */
  async call<T>(call: GraphCall<T>): Promise<T> {
    const undici = await loadUndici();
    const headers: Record<string, string> = { authorization: `Bearer ${call.token}`, accept: 'application/json' };
    let body: string | Undici.FormData | undefined;
    if (call.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(call.json);
    } else if (call.form) {
      const form = new undici.FormData();
      for (const [name, value] of call.form) {
        if (typeof value === 'string') form.append(name, value);
        else form.append(name, new Blob([Buffer.from(value.bytes)], { type: value.contentType }), value.filename);
      }
      body = form;
    }
    // A deadline timer cleared once the answer is read: an abort that fires after the call completed would reach
    // undici's finished request as an unhandled error.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new DOMException('the Graph API call timed out', 'TimeoutError')), this.timeoutMs);
    const combined = new AbortController();
    const abort = () => combined.abort();
    call.signal.addEventListener('abort', abort, { once: true });
    deadline.signal.addEventListener('abort', abort, { once: true });
    let response: Undici.Dispatcher.ResponseData;
    let text: string;
    try {
      if (call.signal.aborted) abort();
      response = await undici.request(this.url(call.path, call.query), {
        method: call.method,
        headers,
        body,
        signal: combined.signal,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        ...(this.options.dispatcher ? { dispatcher: this.options.dispatcher } : {}),
      });
      text = await response.body.text();
    } catch (error) {
      if (call.signal.aborted && !deadline.signal.aborted) {
        // The caller gave up (lease lost, shutdown): the request may have gone out; the caller decides what next.
        throw new GraphError('provider_aborted', 'the Graph API call was aborted', { retryable: true, mayHaveBeenSent: call.sends === true });
      }
      throw networkError(error, deadline.signal.aborted, call.sends === true);
    } finally {
      clearTimeout(timer);
      call.signal.removeEventListener('abort', abort);
    }
    const parsed = parseJson(text);
    if (response.statusCode >= 200 && response.statusCode < 300) {
      if (call.accept(parsed)) return parsed;
      // A 2xx means Meta may have acted on it: never retried, even when its answer is unusable.
      throw new GraphError('provider_bad_response', `the Graph API answered ${response.statusCode} without the expected body`, {
        retryable: false,
        mayHaveBeenSent: call.sends === true,
      }, { httpStatus: response.statusCode });
    }
    throw graphError(response.statusCode, parsed, call.family);
  }

  /**
   * Streams media from `url` with the size cap and type check. Fails early from the headers (status,
   * Content-Type, Content-Length) and, when the length is not announced, mid-stream once the cap is passed.
   */
  async download(url: string, options: DownloadOptions): Promise<MediaDownload> {
    const undici = await loadUndici();
    let response: Undici.Dispatcher.ResponseData;
    let current = url;
    for (let hop = 0; ; hop++) {
      try {
        response = await undici.request(current, {
          method: 'GET',
          headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
          signal: options.signal,
          headersTimeout: this.timeoutMs,
          bodyTimeout: this.timeoutMs,
          ...(options.dispatcher ? { dispatcher: options.dispatcher } : this.options.dispatcher ? { dispatcher: this.options.dispatcher } : {}),
        });
      } catch (error) {
        const failure = classifyNetError(error);
        throw new MediaDownloadError(failure.code === 'timeout' ? 'timeout' : 'unreachable', failure.message, failure.code !== 'blocked_destination');
      }
      // Messenger/Instagram attachment URLs may redirect to the CDN; a few hops over http(s) are followed (each one
      // through the same dispatcher, so the SSRF guard sees every address). A bearer token never leaves for another host.
      const location = headerValue(response.headers.location);
      if (!REDIRECTS.has(response.statusCode) || !location || hop >= (options.maxRedirects ?? 0)) break;
      response.body.on('error', () => {});
      response.body.destroy();
      const next = new URL(location, current);
      if (next.protocol !== 'https:' && next.protocol !== 'http:') throw new MediaDownloadError('http_error', `the media URL redirected to ${next.protocol}`, false);
      if (options.token && next.host !== new URL(current).host) throw new MediaDownloadError('http_error', 'the media URL redirected to another host', false);
      current = next.toString();
    }
    const fail = (reason: MediaFailureReason, message: string, retryable: boolean): never => {
      // Dropping an unread body aborts its request; the abort error it emits has no reader to go to.
      response.body.on('error', () => {});
      response.body.destroy();
      throw new MediaDownloadError(reason, message, retryable);
    };
    const status = response.statusCode;
    if (status === 404 || status === 410) fail('not_found', `the media URL answered ${status}`, false);
    if (status < 200 || status >= 300) fail('http_error', `the media URL answered ${status}`, status >= 500 || status === 429);
    const announced = baseType(headerValue(response.headers['content-type']));
    const expected = options.expectedContentType ? baseType(options.expectedContentType) : '';
    if (!announced || NOT_MEDIA.has(announced)) fail('content_type', `the media URL answered ${announced || 'no content type'}`, false);
    const octet = announced === 'application/octet-stream';
    if (expected && !octet && announced !== expected) fail('content_type', `expected ${expected}, the media URL answered ${announced}`, false);
    const lengthText = headerValue(response.headers['content-length']);
    const sizeBytes = lengthText && /^[0-9]+$/.test(lengthText) ? Number(lengthText) : undefined;
    if (sizeBytes !== undefined && sizeBytes > options.maxBytes) fail('too_large', `${sizeBytes} bytes, more than the ${options.maxBytes} allowed`, false);
    const contentType = octet && options.expectedContentType ? options.expectedContentType : (headerValue(response.headers['content-type']) ?? announced);
    return { contentType, ...(sizeBytes !== undefined ? { sizeBytes } : {}), body: Readable.from(capped(response.body, options.maxBytes)) };
  }
}

async function* capped(source: AsyncIterable<Uint8Array>, maxBytes: number): AsyncGenerator<Uint8Array> {
  let total = 0;
  for await (const chunk of source) {
    total += chunk.byteLength;
    if (total > maxBytes) throw new MediaDownloadError('too_large', `more than the ${maxBytes} bytes allowed`, false);
    yield chunk;
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function baseType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0].trim().toLowerCase();
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Meta's error envelope → `GraphError` with the code, retryability and window flag of decisions 7.1. */
export function graphError(httpStatus: number, body: unknown, family: GraphFamily): GraphError {
  const transient = httpStatus >= 500 || httpStatus === 429;
  if (!isGraphErrorEnvelope(body) || body.error.code === undefined) {
    return new GraphError(`provider_http_${httpStatus}`, `the Graph API answered ${httpStatus}`, { retryable: transient }, { httpStatus });
  }
  const e = body.error;
  const graphCode = e.code ?? 0;
  const details = hasErrorDetails(e.error_data) ? e.error_data.details : undefined;
  const message = cutText([e.message, details].filter(Boolean).join(': '), 500) || `the Graph API answered ${httpStatus}`;
  const closesWindow = family === 'whatsapp' ? graphCode === REENGAGEMENT_CODE : graphCode === 10 && e.error_subcode === WINDOW_SUBCODE;
  return new GraphError(
    `${family}_${graphCode}`,
    message,
    { retryable: transient || RETRYABLE_CODES.has(graphCode), closesWindow },
    {
      httpStatus,
      graphCode,
      ...(e.error_subcode !== undefined ? { subcode: e.error_subcode } : {}),
      ...(e.type ? { type: e.type } : {}),
      ...(e.fbtrace_id ? { fbtraceId: e.fbtrace_id } : {}),
    },
  );
}

function networkError(error: unknown, deadlinePassed: boolean, sends: boolean): GraphError {
  const failure = classifyNetError(error, deadlinePassed);
  // Refused before a byte went out: certainly not sent. After the request was written, it may be out.
  const neverLeft =
    failure.code === 'dns' ||
    failure.code === 'tls' ||
    failure.code === 'blocked_destination' ||
    failure.message.startsWith('ECONNREFUSED') ||
    failure.message.startsWith('UND_ERR_CONNECT_TIMEOUT');
  const timedOut = failure.code === 'timeout';
  return new GraphError(
    timedOut ? 'provider_timeout' : 'provider_unreachable',
    timedOut ? `the Graph API did not answer in time (${failure.message})` : `could not reach the Graph API (${failure.message})`,
    { retryable: failure.code !== 'blocked_destination', mayHaveBeenSent: sends && !neverLeft },
  );
}
