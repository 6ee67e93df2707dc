import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Readable, Transform } from 'node:stream';
import { LazyGuardedAgent, loadUndici } from '../../net/undici.js';
import { classifyNetError } from '../../net/failure.js';
import type { Resolver } from '../../net/guard.js';

export type FetchErrorCode = 'blocked_destination' | 'timeout' | 'too_large' | 'connection' | 'host_not_found';

/** A request that got no usable answer. */
export class CrawlFetchError extends Error {
  constructor(
    readonly code: FetchErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'CrawlFetchError';
  }
}

export interface FetcherOptions {
  allowPrivate: boolean;
  /** Deadline of one request: connecting, headers and the whole body. */
  timeoutMs: number;
  /** Body size cap (after decompression). */
  maxBytes: number;
  userAgent: string;
  /** Connections kept per origin; the crawler's per-host limit keeps requests below it. */
  connections: number;
  resolver?: Resolver;
}

export interface Answer {
  status: number;
  /** Location of a 3xx answer, as sent. */
  location?: string;
  contentType?: string;
  /** The body of a 2xx answer whose content type was accepted. */
  body?: Buffer;
  /** Validators a later conditional request sends back (ETag, Last-Modified), as sent. */
  etag?: string;
  lastModified?: string;
  /** Retry-After of a 429 or 503, as sent. */
  retryAfter?: string;
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}


function decoder(encoding: string | undefined): Transform | undefined {
  switch ((encoding ?? '').trim().toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      return undefined;
  }
}

/**
 * One GET at a time through the SSRF guard (src/net/connector.ts). Redirects are never followed here: the
 * crawler follows them hop by hop (src/net/redirects.ts) so each hop is checked (site, robots, duplicates) like a link.
 */
export class CrawlFetcher {
  private readonly agent: LazyGuardedAgent;

  constructor(private readonly opts: FetcherOptions) {
    this.agent = new LazyGuardedAgent(opts, { connections: opts.connections, keepAliveTimeout: 4_000, headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs });
  }

  /**
   * GETs `url`. A 2xx whose content type `accept` approves comes back with its body (decompressed, capped
   * at maxBytes); any other answer comes back without one. No answer at all throws CrawlFetchError; the
   * caller's `signal` aborting rethrows its reason.
   */
  async get(url: URL, accept: (contentType: string) => boolean, acceptHeader: string, signal?: AbortSignal, extraHeaders?: Record<string, string>): Promise<Answer> {
    // One controller for the deadline and the caller's signal (AbortSignal.timeout + AbortSignal.any cost a
    // timer, a weak registration on the crawl-wide signal and a finalizer per request); released at the end.
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException('the request took too long', 'TimeoutError'));
    }, this.opts.timeoutMs);
    const onAbort = () => controller.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    const combined = controller.signal;
    let body: Readable | undefined;
    try {
      const [{ request }, dispatcher] = await Promise.all([loadUndici(), this.agent.get()]);
      const res = await request(url, {
        dispatcher,
        method: 'GET',
        headers: { ...extraHeaders, 'user-agent': this.opts.userAgent, accept: acceptHeader, 'accept-encoding': 'gzip, deflate, br' },
        signal: combined,
      });
      body = res.body;
      const status = res.statusCode;
      const contentType = header(res.headers['content-type']);
      const validators = { etag: header(res.headers.etag), lastModified: header(res.headers['last-modified']) };
      // A 304's (empty) body and any other 3xx body are never read.
      if (status >= 300 && status < 400) {
        body.on('error', () => undefined).destroy();
        return { status, location: header(res.headers.location), contentType, ...validators };
      }
      if (status < 200 || status >= 300 || !accept(contentType ?? '')) {
        body.on('error', () => undefined).destroy();
        return { status, contentType, retryAfter: header(res.headers['retry-after']) };
      }
      return { status, contentType, ...validators, body: await this.read(body, header(res.headers['content-encoding'])) };
    } catch (error) {
      body?.on('error', () => undefined).destroy();
      if (signal?.aborted) throw signal.reason ?? error;
      if (error instanceof CrawlFetchError) throw error;
      const failure = classifyNetError(error, timedOut);
      if (failure.code === 'blocked_destination') throw new CrawlFetchError('blocked_destination', failure.blockedReason ?? failure.message);
      if (failure.code === 'timeout') throw new CrawlFetchError('timeout', `no complete answer within ${this.opts.timeoutMs} ms`);
      // The name does not resolve (any more): a site that vanished, told apart from one that is down.
      if (failure.hostNotFound) throw new CrawlFetchError('host_not_found', `the host ${url.hostname} could not be found (DNS)`);
      throw new CrawlFetchError('connection', failure.message);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The body, collected from its data events (no async iterator per body: a crawl reads many small pages). */
  private read(raw: Readable, encoding: string | undefined): Promise<Buffer> {
    const decode = decoder(encoding);
    // pipe() does not pass errors on: an aborted or failed body must end the decompressor too.
    if (decode) raw.on('error', (error) => decode.destroy(error));
    const stream: Readable = decode ? raw.pipe(decode) : raw;
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      const fail = (error: unknown) => {
        if (settled) return;
        settled = true;
        raw.on('error', () => undefined).destroy();
        decode?.on('error', () => undefined).destroy();
        // A corrupt compressed body is no answer either.
        if (decode && !(error instanceof CrawlFetchError) && !(error as { name?: string }).name?.includes('Abort')) {
          reject(new CrawlFetchError('connection', `the ${encoding} body could not be decoded`));
        } else reject(error);
      };
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > this.opts.maxBytes) fail(new CrawlFetchError('too_large', `the response is larger than ${this.opts.maxBytes} bytes`));
        else chunks.push(chunk);
      });
      stream.once('error', fail);
      stream.once('end', () => {
        if (settled) return;
        settled = true;
        resolve(Buffer.concat(chunks, size));
      });
    });
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
