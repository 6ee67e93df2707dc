import type { IncomingMessage } from 'node:http';
import { pipeline, Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The first bytes of every request body are read at once; only what comes after them shares the node's rate. */
export const UNMETERED_BODY_BYTES = 64 * 1024;

/**
 * The bytes per second that request bodies past their first UNMETERED_BODY_BYTES may be read at, on this node,
 * all requests together (docs/decisions.md, "Big bodies share one rate"). A generic cell rate: `reserve` books
 * bytes after everything booked before them and says how long to wait; an idle second is credit for a second's
 * worth at once, so one upload on a quiet node is not slowed.
 */
export class BodyRate {
  private bookedUntilMs = 0;

  constructor(
    private readonly bytesPerSecond: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Books `bytes`; returns the milliseconds to wait before reading them. */
  reserve(bytes: number): number {
    const now = this.now();
    this.bookedUntilMs = Math.max(this.bookedUntilMs, now - 1000) + (bytes / this.bytesPerSecond) * 1000;
    return Math.max(0, this.bookedUntilMs - now);
  }
}

/** Passes a body through, holding each chunk past the unmetered start until the rate allows it. */
class MeteredBody extends Transform {
  private received = 0;

  constructor(private readonly rate: BodyRate) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    const metered = Math.min(chunk.length, this.received + chunk.length - UNMETERED_BODY_BYTES);
    this.received += chunk.length;
    const waitMs = metered > 0 ? this.rate.reserve(metered) : 0;
    if (waitMs < 1) callback(null, chunk);
    else setTimeout(() => callback(null, chunk), waitMs);
  }
}

function mayExceedUnmetered(raw: IncomingMessage): boolean {
  if (raw.headers['transfer-encoding'] !== undefined) return true;
  return Number(raw.headers['content-length']) > UNMETERED_BODY_BYTES;
}

/**
 * Every body that may pass UNMETERED_BODY_BYTES is read through the node's BodyRate (after authentication, which
 * runs on `onRequest`). While a chunk waits its socket is not read, so TCP holds the sender back.
 */
export function registerBodyRate(app: FastifyInstance, rate: BodyRate): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    if (!mayExceedUnmetered(request.raw)) return done(null, payload);
    const metered = new MeteredBody(rate);
    done(null, pipeline(payload, metered, () => undefined));
  });
}

/**
 * For refusals: a request whose body may pass UNMETERED_BODY_BYTES and is still arriving (refused by
 * authentication, the rate limit or the router before the body was read) is answered with `Connection: close`.
 * Node would otherwise read the rest of the body, at full speed and past the rate, to reuse the connection.
 */
export function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  if (!request.raw.complete && mayExceedUnmetered(request.raw)) void reply.header('connection', 'close');
}

/** Methods whose body Fastify never reads: a body sent with one is left on the socket. */
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'TRACE']);

/**
 * A request that carries a body no route reads (a GET with a JSON body) is answered with `Connection: close`:
 * left unread, the body would stay on the keep-alive connection and the next request on it would never be
 * parsed. Set on the raw response so that every answer to it, refusals included, carries it.
 */
export function closeIfBodyIgnored(request: FastifyRequest, reply: FastifyReply): void {
  const { method, headers } = request.raw;
  if (method === undefined || !BODYLESS_METHODS.has(method)) return;
  const contentLength = headers['content-length'];
  if (headers['transfer-encoding'] !== undefined || (contentLength !== undefined && contentLength !== '0')) reply.raw.setHeader('Connection', 'close');
}
