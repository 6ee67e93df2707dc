import { isIP, isIPv6, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { BlockedDestinationError, isPublicIPv4, resolvePublicIPv4, type Resolver } from './ssrf.js';

export type FailureCode = 'http_status' | 'redirect' | 'timeout' | 'dns' | 'connection' | 'blocked_destination' | 'tls';

export interface PostResult {
  ok: boolean;
  httpStatus?: number;
  failureCode?: FailureCode;
  errorMessage?: string;
  durationMs: number;
}

export interface WebhookHttpClientOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  resolver?: Resolver;
  userAgent: string;
  /** default 4096 */
  maxResponseBytes?: number;
}

const DEFAULT_MAX_RESPONSE_BYTES = 4096;
const MAX_ERROR_MESSAGE_LENGTH = 300;

/**
 * A net-style lookup that only ever answers with addresses resolvePublicIPv4 approved,
 * so the socket connects to exactly the address that was checked (no DNS rebinding window).
 */
function guardedLookup(allowPrivate: boolean, resolver: Resolver | undefined): LookupFunction {
  return (hostname, options, callback) => {
    resolvePublicIPv4(hostname, { allowPrivate, resolver }).then(
      (addresses) => {
        const wanted = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
        const answers = addresses
          .map((address) => ({ address, family: isIP(address) }))
          .filter((a) => wanted === 0 || a.family === wanted);
        if (answers.length === 0) {
          const err: NodeJS.ErrnoException = new Error(`no usable address for ${hostname}`);
          err.code = 'ENOTFOUND';
          callback(err, '');
          return;
        }
        if (options.all) callback(null, answers);
        else callback(null, answers[0].address, answers[0].family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
}

/** Also used by the website crawler (src/knowledge/crawler/fetcher.ts): one SSRF guard for every outbound request. */
export function guardedConnector(opts: WebhookHttpClientOptions): buildConnector.connector {
  const connect = buildConnector({
    timeout: opts.timeoutMs,
    keepAlive: true,
    lookup: guardedLookup(opts.allowPrivate, opts.resolver),
  });
  if (opts.allowPrivate) return connect;

  return (options, callback) => {
    // IP-literal hosts never reach the lookup; refuse them before any packet is sent.
    const literal = options.hostname;
    if (isIP(literal) !== 0 && (isIPv6(literal) || !isPublicIPv4(literal))) {
      process.nextTick(() => callback(new BlockedDestinationError(`destination ${literal} is not a public address`), null));
      return;
    }

    connect(options, (err, socket) => {
      if (err !== null) {
        callback(err, null);
        return;
      }
      // Last line of defence: whatever path led here, the peer must be a public IPv4 address.
      const remote = socket.remoteAddress;
      if (remote === undefined || !isPublicIPv4(remote)) {
        socket.destroy();
        callback(
          new BlockedDestinationError(`connection to ${options.hostname} reached non-public address ${remote ?? 'unknown'}`),
          null,
        );
        return;
      }
      callback(null, socket);
    });
  };
}

export class WebhookHttpClient {
  private readonly agent: Agent;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly maxResponseBytes: number;

  constructor(opts: WebhookHttpClientOptions) {
    this.timeoutMs = opts.timeoutMs;
    this.userAgent = opts.userAgent;
    this.maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    // A plain Agent ignores HTTP(S)_PROXY, and no redirect interceptor is composed in.
    this.agent = new Agent({
      connect: guardedConnector(opts),
      connections: 64,
      keepAliveTimeout: 10_000,
      keepAliveMaxTimeout: 10_000,
      // The attempt's own deadline (exchange) bounds headers and body together; undici's per-phase timers would
      // only add a timer object per request.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  async post(url: string, body: string, headers: Record<string, string>): Promise<PostResult> {
    const started = performance.now();
    const durationMs = () => Math.round(performance.now() - started);

    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return { ok: false, failureCode: 'blocked_destination', errorMessage: 'invalid url', durationMs: durationMs() };
    }
    if (target.protocol !== 'https:' && target.protocol !== 'http:') {
      return { ok: false, failureCode: 'blocked_destination', errorMessage: 'url must use http or https', durationMs: durationMs() };
    }

    const exchange = await this.exchange(target, body, this.buildHeaders(headers));
    const httpStatus = exchange.status;
    if (exchange.error !== undefined) {
      const err = exchange.error;
      const failureCode = exchange.timedOut && !isBlocked(err) ? 'timeout' : classifyError(err);
      // A status is kept when the failure happened while reading the response body.
      return {
        ok: false,
        ...(httpStatus !== undefined && { httpStatus }),
        failureCode,
        errorMessage: describeError(err),
        durationMs: durationMs(),
      };
    }
    if (httpStatus === undefined) {
      return { ok: false, failureCode: 'connection', errorMessage: 'no response', durationMs: durationMs() };
    }
    if (httpStatus >= 200 && httpStatus < 300) {
      return { ok: true, httpStatus, durationMs: durationMs() };
    }
    if (httpStatus >= 300 && httpStatus < 400) {
      return { ok: false, httpStatus, failureCode: 'redirect', errorMessage: `redirect ${httpStatus} not followed`, durationMs: durationMs() };
    }
    return { ok: false, httpStatus, failureCode: 'http_status', errorMessage: `HTTP ${httpStatus}`, durationMs: durationMs() };
  }

  /**
   * One POST through the agent with a handler of our own: the final status, the body read up to
   * `maxResponseBytes` and dropped (past that the connection goes with it), and one deadline for the whole
   * exchange. undici's request() with an AbortSignal cost a response stream, an async iterator and a signal
   * per attempt: about 60% more CPU per request, and six times the garbage that outlives a young-generation GC.
   */
  private exchange(target: URL, body: string, headers: Record<string, string>): Promise<Exchange> {
    return new Promise((resolve) => {
      let controller: Dispatcher.DispatchController | undefined;
      let status: number | undefined;
      let received = 0;
      let timedOut = false;
      let settled = false;
      const deadline = () => new DOMException(`webhook attempt timed out after ${this.timeoutMs} ms`, 'TimeoutError');
      const timer = setTimeout(() => {
        timedOut = true;
        // Not started yet (connecting): onRequestStart aborts it.
        controller?.abort(deadline());
      }, this.timeoutMs);
      const finish = (result: Exchange) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart: (started) => {
          controller = started;
          if (timedOut) started.abort(deadline());
        },
        onResponseStart: (_started, statusCode) => {
          if (statusCode >= 200) status = statusCode;
        },
        onResponseData: (started, chunk) => {
          received += chunk.length;
          if (received < this.maxResponseBytes) return;
          finish({ status, timedOut });
          started.abort(new Error('response body limit reached'));
        },
        onResponseEnd: () => finish({ status, timedOut }),
        onResponseError: (_started, error) => finish({ status, error, timedOut }),
      };
      try {
        this.agent.dispatch({ origin: target.origin, path: `${target.pathname}${target.search}`, method: 'POST', headers, body }, handler);
      } catch (error) {
        finish({ status, error, timedOut });
      }
    });
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  private buildHeaders(headers: Record<string, string>): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = value;
    out['content-type'] = 'application/json';
    out['user-agent'] = this.userAgent;
    return out;
  }
}

interface Exchange {
  status?: number;
  /** Why the exchange failed (the status, if any, arrived before). */
  error?: unknown;
  /** The attempt's deadline passed (a failure after it is a timeout). */
  timedOut: boolean;
}

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** The error itself, its `cause` chain and AggregateError members (net's happy-eyeballs reports those). */
function errorChain(err: unknown): ErrorLike[] {
  const out: ErrorLike[] = [];
  const queue: unknown[] = [err];
  while (queue.length > 0 && out.length < 10) {
    const e = queue.shift();
    if (typeof e !== 'object' || e === null || out.includes(e as ErrorLike)) continue;
    const like = e as ErrorLike;
    out.push(like);
    if (like.cause !== undefined) queue.push(like.cause);
    if (Array.isArray(like.errors)) queue.push(...like.errors);
  }
  return out;
}

function codeOf(e: ErrorLike): string {
  return typeof e.code === 'string' ? e.code : '';
}

function isBlockedOne(e: ErrorLike): boolean {
  return e instanceof BlockedDestinationError || codeOf(e) === 'BLOCKED_DESTINATION';
}
function isBlocked(err: unknown): boolean {
  return errorChain(err).some(isBlockedOne);
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_ABORTED',
  'ABORT_ERR',
  'ETIMEDOUT',
]);
const DNS_CODES = new Set(['ENOTFOUND', 'ENODATA', 'ESERVFAIL', 'ETIMEOUT', 'ENONAME']);
const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'EPROTO',
]);

function isTimeout(e: ErrorLike): boolean {
  return e.name === 'AbortError' || e.name === 'TimeoutError' || TIMEOUT_CODES.has(codeOf(e));
}
function isDns(e: ErrorLike): boolean {
  const code = codeOf(e);
  return DNS_CODES.has(code) || code.startsWith('EAI_');
}
function isTls(e: ErrorLike): boolean {
  const code = codeOf(e);
  return (
    TLS_CODES.has(code) ||
    code.startsWith('ERR_TLS_') ||
    code.startsWith('ERR_SSL_') ||
    code.startsWith('ERR_OSSL_') ||
    code.startsWith('CERT_')
  );
}

function classifyError(err: unknown): FailureCode {
  const chain = errorChain(err);
  if (isBlocked(err)) return 'blocked_destination';
  if (chain.some(isTimeout)) return 'timeout';
  if (chain.some(isDns)) return 'dns';
  if (chain.some(isTls)) return 'tls';
  return 'connection';
}

/** "CODE: message" of the most specific error in the chain; single line, no stack, bounded. */
function describeError(err: unknown): string {
  const chain = errorChain(err);
  const pick = chain.find((e) => isBlockedOne(e) || isTimeout(e) || isDns(e) || isTls(e)) ?? chain.find((e) => codeOf(e) !== '') ?? chain[0];
  if (pick === undefined) return String(err).slice(0, MAX_ERROR_MESSAGE_LENGTH);
  const label = codeOf(pick) || (typeof pick.name === 'string' ? pick.name : 'Error');
  const message = typeof pick.message === 'string' ? pick.message : '';
  const text = message ? `${label}: ${message}` : label;
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim().slice(0, MAX_ERROR_MESSAGE_LENGTH);
}
