import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { errorCodes, type FastifyInstance } from 'fastify';
import { bodyLengthCaps } from './input-guard.js';

/** Bodies from this size (bytes) on are parsed off the event loop (docs/decisions.md, "Hostile input"). */
export const OFF_THREAD_JSON_BYTES = 1024 * 1024;

const PARSE_OPTIONS = { protoAction: 'error', constructorAction: 'error' } as const;

// CommonJS source, so that it runs the same under the TypeScript loader and from the compiled build.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const secureJson = require(workerData.secureJsonParse);
function shorten(body, caps) {
  for (const [path, cap] of caps) {
    const keys = path.split('.').slice(1);
    if (keys.length === 0) continue;
    let parent = body;
    for (const key of keys.slice(0, -1)) parent = has(parent, key) ? parent[key] : undefined;
    const last = keys[keys.length - 1];
    if (!has(parent, last)) continue;
    const text = parent[last];
    if (typeof text === 'string' && text.length > 2 * cap) parent[last] = text.slice(0, 2 * cap + 1);
  }
}
function has(value, key) {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, key);
}
parentPort.on('message', ({ id, bytes, caps }) => {
  let value;
  try {
    value = secureJson.parse(Buffer.from(bytes), workerData.options);
  } catch {
    parentPort.postMessage({ id, ok: false });
    return;
  }
  if (caps && typeof value === 'object' && value !== null) shorten(value, caps);
  parentPort.postMessage({ id, ok: true, value });
});
`;

interface Reply {
  id: number;
  ok: boolean;
  value?: unknown;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/**
 * A thread idle this long is stopped: its heap grew to hold the largest bodies it parsed, and only ending the
 * thread gives that memory back (docs/decisions.md, "Big bodies do not hold the event loop").
 */
const IDLE_STOP_MS = 2_000;

interface ParserThread {
  worker: Worker;
  /** Requests sent to this thread and not answered yet: a thread that ends fails only its own. */
  pending: Map<number, Pending>;
  idleTimer?: NodeJS.Timeout;
}

/** One worker thread, started on first use and again after it dies or idles, that parses JSON bytes (UTF-8). */
export class JsonParserThread {
  private current: ParserThread | undefined;
  private nextId = 0;

  constructor(private readonly idleStopMs = IDLE_STOP_MS) {}

  /** Whether a thread is running now (it is stopped once idle). */
  get running(): boolean {
    return this.current !== undefined;
  }

  /**
   * Parses `body`, which is the thread's from now on: a buffer that owns its whole memory (as a request body
   * does) is handed over without a copy, so the event loop neither decodes nor copies it. `caps` are the route's
   * string caps by path (input-guard.ts): a string over twice its cap, which the input guard refuses whatever
   * it holds, comes back cut to one character more than that, still refused with the same words, instead of
   * whole (a 10 MB text: 2 MB copied into the event loop's heap, not 10).
   */
  parse(body: Buffer, caps?: Array<[string, number]>): Promise<unknown> {
    const thread = this.current ?? this.start();
    clearTimeout(thread.idleTimer);
    const id = this.nextId++;
    const owned = body.byteOffset === 0 && body.buffer.byteLength === body.byteLength && body.buffer instanceof ArrayBuffer;
    const bytes = owned ? body.buffer : new Uint8Array(body).buffer;
    return new Promise((resolve, reject) => {
      thread.pending.set(id, { resolve, reject });
      thread.worker.postMessage({ id, bytes, caps }, [bytes]);
    });
  }

  private stopWhenIdle(thread: ParserThread): void {
    clearTimeout(thread.idleTimer);
    if (thread.pending.size > 0) return;
    thread.idleTimer = setTimeout(() => {
      if (this.current === thread) this.current = undefined;
      void thread.worker.terminate();
    }, this.idleStopMs).unref();
  }

  private start(): ParserThread {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { secureJsonParse: createRequire(import.meta.url).resolve('secure-json-parse'), options: PARSE_OPTIONS },
    });
    const thread: ParserThread = { worker, pending: new Map() };
    worker.on('message', (reply: Reply) => {
      const waiting = thread.pending.get(reply.id);
      thread.pending.delete(reply.id);
      if (!waiting) return;
      if (reply.ok) waiting.resolve(reply.value);
      else waiting.reject(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY());
      this.stopWhenIdle(thread);
    });
    const fail = (error: Error) => {
      if (this.current === thread) this.current = undefined;
      clearTimeout(thread.idleTimer);
      for (const waiting of thread.pending.values()) waiting.reject(error);
      thread.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', () => fail(new Error('the JSON parser thread exited')));
    // Unref'd after its listeners are attached (attaching one refs it again): it never keeps the process alive.
    worker.unref();
    this.current = thread;
    return thread;
  }
}

/**
 * application/json as Fastify parses it (prototype poisoning refused, an empty body is 400 but on the admin API), but a body of a
 * megabyte or more (only routes with a raised body limit take one) is parsed on another thread: parsing
 * ten megabytes holds the event loop for tens of milliseconds, and every other request would wait.
 */
export function registerJsonParser(app: FastifyInstance): void {
  const inline = app.getDefaultJsonParser(PARSE_OPTIONS.protoAction, PARSE_OPTIONS.constructorAction);
  const thread = new JsonParserThread();
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    // The admin API's callers (the dashboard, scripts) send the JSON content type on POSTs without a body:
    // that is the empty object, as a POST without any body is (decisions 7.4).
    if (bytes.length === 0 && request.url.startsWith('/admin/')) return done(null, {});
    if (bytes.length < OFF_THREAD_JSON_BYTES) return inline(request, bytes.toString('utf8'), done);
    thread.parse(bytes, bodyLengthCaps(request)).then(
      (value) => done(null, value),
      (error: Error) => done(error, undefined),
    );
  });
}
