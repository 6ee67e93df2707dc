import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { errorCodes, type FastifyInstance } from 'fastify';

/** Bodies from this size on are parsed off the event loop (docs/decisions.md, "Hostile input"). */
export const OFF_THREAD_JSON_CHARS = 1024 * 1024;

const PARSE_OPTIONS = { protoAction: 'error', constructorAction: 'error' } as const;

// CommonJS source, so that it runs the same under the TypeScript loader and from the compiled build.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const secureJson = require(workerData.secureJsonParse);
parentPort.on('message', ({ id, text }) => {
  let value;
  try {
    value = secureJson.parse(text, workerData.options);
  } catch {
    parentPort.postMessage({ id, ok: false });
    return;
  }
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

/** One worker thread, started on first use and again after it dies, that parses JSON text. */
class JsonParserThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  parse(text: string): Promise<unknown> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, text });
    });
  }

  private start(): Worker {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { secureJsonParse: createRequire(import.meta.url).resolve('secure-json-parse'), options: PARSE_OPTIONS },
    });
    worker.on('message', (reply: Reply) => {
      const waiting = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      if (!waiting) return;
      if (reply.ok) waiting.resolve(reply.value);
      else waiting.reject(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY());
    });
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const waiting of this.pending.values()) waiting.reject(error);
      this.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', () => fail(new Error('the JSON parser thread exited')));
    // Unref'd after its listeners are attached (attaching one refs it again): it never keeps the process alive.
    worker.unref();
    this.worker = worker;
    return worker;
  }
}

/**
 * application/json as Fastify parses it (prototype poisoning refused, an empty body is 400), but a body of a
 * megabyte or more (only routes with a raised body limit take one) is parsed on another thread: parsing
 * ten megabytes holds the event loop for tens of milliseconds, and every other request would wait.
 */
export function registerJsonParser(app: FastifyInstance): void {
  const inline = app.getDefaultJsonParser(PARSE_OPTIONS.protoAction, PARSE_OPTIONS.constructorAction);
  const thread = new JsonParserThread();
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.length < OFF_THREAD_JSON_CHARS) return inline(request, text, done);
    thread.parse(text).then(
      (value) => done(null, value),
      (error: Error) => done(error, undefined),
    );
  });
}
