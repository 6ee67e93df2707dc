import { Agent, request } from 'undici';
import { guardedConnector } from '../webhooks/http-client.js';
import { BlockedDestinationError, validateWebhookUrl, type Resolver } from '../webhooks/ssrf.js';
import { errorChain } from '../util/error-chain.js';

export type FetchFailureCode = 'invalid_url' | 'blocked_destination' | 'http_status' | 'redirect' | 'too_large' | 'timeout' | 'connection';

/** A failed fetch; `permanent` ones are not worth retrying (blocked, 4xx, too large, bad redirects). */
export class FetchFailure extends Error {
  constructor(
    readonly code: FetchFailureCode,
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = 'FetchFailure';
  }
}

export interface GuardedFetchOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  maxBytes: number;
  resolver?: Resolver;
  maxRedirects?: number;
  userAgent?: string;
}

export interface Fetched {
  /** The URL that answered (after redirects). */
  url: string;
  status: number;
  contentType: string | undefined;
  body: Buffer;
}


/** Checks a URL against the destination rules (https on 443 and a public host unless private destinations are allowed). */
export function checkFetchUrl(raw: string, allowPrivate: boolean): URL {
  let candidate: string;
  try {
    const parsed = new URL(raw);
    parsed.hash = '';
    candidate = parsed.toString();
  } catch {
    throw new FetchFailure('invalid_url', 'url must be a valid absolute URL', true);
  }
  const checked = validateWebhookUrl(candidate, { allowPrivate });
  if (!checked.ok) throw new FetchFailure('invalid_url', checked.reason, true);
  return checked.url;
}

/** GET through the SSRF guard: redirects followed by hand (each hop checked), a deadline and a body size cap. */
export class GuardedFetcher {
  private readonly agent: Agent;

  constructor(private readonly opts: GuardedFetchOptions) {
    // The webhook delivery connector: the host is resolved on every new connection, only approved public IPv4
    // addresses are dialled, and the socket's peer is checked again after connecting.
    const connect = guardedConnector({ allowPrivate: opts.allowPrivate, timeoutMs: opts.timeoutMs, resolver: opts.resolver, userAgent: '' });
    this.agent = new Agent({ connect, headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs, connections: 16 });
  }

  async get(url: string, signal?: AbortSignal): Promise<Fetched> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.opts.timeoutMs);
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      let target = checkFetchUrl(url, this.opts.allowPrivate);
      for (let hop = 0; ; hop += 1) {
        const res = await request(target, {
          dispatcher: this.agent,
          method: 'GET',
          headers: {
            'user-agent': this.opts.userAgent ?? 'm2m-knowledge/1.0',
            accept: 'text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5',
            'accept-encoding': 'identity',
          },
          signal: controller.signal,
        });
        if (res.statusCode >= 300 && res.statusCode < 400 && res.headers.location) {
          res.body.on('error', () => undefined).destroy();
          if (hop >= (this.opts.maxRedirects ?? 5)) throw new FetchFailure('redirect', 'too many redirects', true);
          const location = Array.isArray(res.headers.location) ? res.headers.location[0] : res.headers.location;
          target = checkFetchUrl(new URL(location, target).toString(), this.opts.allowPrivate);
          continue;
        }
        if (res.statusCode < 200 || res.statusCode >= 300) {
          res.body.on('error', () => undefined).destroy();
          const transient = res.statusCode >= 500 || res.statusCode === 429 || res.statusCode === 408;
          throw new FetchFailure('http_status', `HTTP ${res.statusCode} from ${target.host}`, !transient);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const chunk of res.body) {
          size += (chunk as Buffer).length;
          if (size > this.opts.maxBytes) {
            res.body.on('error', () => undefined).destroy();
            throw new FetchFailure('too_large', `the page is larger than ${this.opts.maxBytes} bytes`, true);
          }
          chunks.push(chunk as Buffer);
        }
        const type = res.headers['content-type'];
        return { url: target.toString(), status: res.statusCode, contentType: Array.isArray(type) ? type[0] : type, body: Buffer.concat(chunks) };
      }
    } catch (error) {
      if (error instanceof FetchFailure) throw error;
      const errors = errorChain(error);
      if (errors.some((e) => e instanceof BlockedDestinationError || e.code === 'BLOCKED_DESTINATION')) {
        const blocked = errors.find((e) => e instanceof BlockedDestinationError) as Error | undefined;
        throw new FetchFailure('blocked_destination', blocked?.message ?? 'destination is not allowed', true);
      }
      if (controller.signal.aborted) throw new FetchFailure('timeout', `no complete answer within ${this.opts.timeoutMs} ms`, false);
      const code = errors.map((e) => (typeof e.code === 'string' ? e.code : '')).find(Boolean);
      throw new FetchFailure('connection', `${code || 'connection error'}: ${error instanceof Error ? error.message : String(error)}`.slice(0, 300), false);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
