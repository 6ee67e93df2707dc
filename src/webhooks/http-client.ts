import { performance } from 'node:perf_hooks';
import type { Agent, Dispatcher } from 'undici';
import { LazyGuardedAgent } from '../net/undici.js';
import { classifyNetError, type NetFailureCode } from '../net/failure.js';
import type { Resolver } from '../net/guard.js';

export type FailureCode = 'http_status' | 'redirect' | NetFailureCode;

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

export class WebhookHttpClient {
  private readonly agent: LazyGuardedAgent;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly maxResponseBytes: number;

  constructor(opts: WebhookHttpClientOptions) {
    this.timeoutMs = opts.timeoutMs;
    this.userAgent = opts.userAgent;
    this.maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    // A plain Agent ignores HTTP(S)_PROXY, and no redirect interceptor is composed in.
    this.agent = new LazyGuardedAgent(opts, {
      connections: 64,
      keepAliveTimeout: 10_000,
      keepAliveMaxTimeout: 10_000,
      // The attempt's own deadline (exchange) bounds headers and body together; undici's per-phase timers
      // would only add a timer object per request.
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

    const exchange = await this.exchange(await this.agent.get(), target, body, this.buildHeaders(headers));
    const httpStatus = exchange.status;
    if (exchange.error !== undefined) {
      const failure = classifyNetError(exchange.error, exchange.timedOut);
      // A status is kept when the failure happened while reading the response body.
      return {
        ok: false,
        ...(httpStatus !== undefined && { httpStatus }),
        failureCode: failure.code,
        errorMessage: failure.message,
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
   * exchange. undici's request() with an AbortSignal would make a response stream, an async iterator and a
   * signal per attempt, none of which a dropped body needs.
   */
  private exchange(agent: Agent, target: URL, body: string, headers: Record<string, string>): Promise<Exchange> {
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
        agent.dispatch({ origin: target.origin, path: `${target.pathname}${target.search}`, method: 'POST', headers, body }, handler);
      } catch (error) {
        finish({ status, error, timedOut });
      }
    });
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  /** Ends every request in flight at once (each fails with a connection error). */
  async destroy(): Promise<void> {
    await this.agent.destroy();
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
