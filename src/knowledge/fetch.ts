import type { Dispatcher } from 'undici';
import { LazyGuardedAgent, loadUndici } from '../net/undici.js';
import { classifyNetError } from '../net/failure.js';
import { validateWebhookUrl, type Resolver } from '../net/guard.js';
import { followRedirects } from '../net/redirects.js';

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
  private readonly agent: LazyGuardedAgent;

  constructor(private readonly opts: GuardedFetchOptions) {
    this.agent = new LazyGuardedAgent(opts, { headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs, connections: 16 });
  }

  async get(url: string, signal?: AbortSignal): Promise<Fetched> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.opts.timeoutMs);
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const followed = await followRedirects(checkFetchUrl(url, this.opts.allowPrivate), {
        maxRedirects: this.opts.maxRedirects ?? 5,
        request: (target) => this.request(target, controller.signal),
        next: (location, from) => checkFetchUrl(new URL(location, from).toString(), this.opts.allowPrivate),
      });
      if (followed.kind !== 'answer') throw new FetchFailure('redirect', 'too many redirects', true);
      const { url: target, answer } = followed;
      const res = answer.response;
      if (answer.status < 200 || answer.status >= 300) {
        res.body.on('error', () => undefined).destroy();
        const transient = answer.status >= 500 || answer.status === 429 || answer.status === 408;
        throw new FetchFailure('http_status', `HTTP ${answer.status} from ${target.host}`, !transient);
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
      return { url: target.toString(), status: answer.status, contentType: Array.isArray(type) ? type[0] : type, body: Buffer.concat(chunks) };
    } catch (error) {
      if (error instanceof FetchFailure) throw error;
      const failure = classifyNetError(error, controller.signal.aborted);
      if (failure.code === 'blocked_destination') throw new FetchFailure('blocked_destination', failure.blockedReason ?? failure.message, true);
      if (failure.code === 'timeout') throw new FetchFailure('timeout', `no complete answer within ${this.opts.timeoutMs} ms`, false);
      throw new FetchFailure('connection', failure.message, false);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** One GET; a redirect's body is dropped at once (its Location is all that is read). */
  private async request(target: URL, signal: AbortSignal): Promise<{ status: number; location?: string; response: Dispatcher.ResponseData }> {
    const { request } = await loadUndici();
    const response = await request(target, {
      dispatcher: await this.agent.get(),
      method: 'GET',
      headers: {
        'user-agent': this.opts.userAgent ?? 'm2m-knowledge/1.0',
        accept: 'text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5',
        'accept-encoding': 'identity',
      },
      signal,
    });
    const header = response.headers.location;
    const location = Array.isArray(header) ? header[0] : header;
    if (response.statusCode >= 300 && response.statusCode < 400 && location) response.body.on('error', () => undefined).destroy();
    return { status: response.statusCode, location, response };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
