/**
 * Example webhook receiver on plain `node:http`.
 *
 *   PORT=3000 WEBHOOK_SECRET=whsec_… EVENTS_FILE=./events.ndjson \
 *     node --import tsx packages/client/examples/receiver.ts
 *
 * What a receiver must do (spec, Events):
 *   1. read the RAW body bytes and verify the signature before parsing JSON;
 *   2. reject stale or future timestamps (five minutes), compare signatures in constant time;
 *   3. deduplicate on eventId (delivery is at least once, in no particular order);
 *   4. answer 2xx only after durably accepting the event, quickly (the sender gives up after 10 s):
 *      do the real work asynchronously from your durable store, not inside the request.
 */
import { open } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import http from 'node:http';
import { pathToFileURL } from 'node:url';
// In an application: import { verifyWebhook, … } from '@m2m/client';
import { SIGNATURE_HEADER, WebhookVerificationError, verifyWebhook, type WebhookEvent } from '../src/index.js';

export interface ReceiverOptions {
  /** Signing secret of the subscription (`whsec_…`). */
  secret: string;
  /**
   * Durably accepts one event (write it to a database, a queue, an fsync'ed file…). Called at most
   * once per eventId while it succeeds; if it throws, the receiver answers 500 and the sender
   * retries later.
   */
  onEvent: (event: WebhookEvent) => void | Promise<void>;
  /** Largest accepted body in bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /** Passed to verifyWebhook (defaults: 300 s, the system clock). */
  toleranceSeconds?: number;
  now?: () => number;
}

class BodyTooLargeError extends Error {}

function readRawBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new BodyTooLargeError(`body larger than ${limit} bytes`));
        req.resume(); // drain the rest without keeping it
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}

function reply(res: http.ServerResponse, status: number, body: Record<string, unknown>, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

export function createReceiver(options: ReceiverOptions): http.Server {
  const { secret, onEvent } = options;
  if (typeof secret !== 'string' || secret === '') throw new TypeError('secret is required');
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;

  // Event ids already accepted. In memory for the example only: production stores them durably
  // (e.g. a unique index on eventId in the same transaction that stores the event, kept for longer
  // than the retry window of about 35 hours), so duplicates are caught across restarts and replicas.
  const seen = new Set<string>();
  // Acceptances in progress, so two concurrent deliveries of one event run onEvent once.
  const inFlight = new Map<string, Promise<void>>();

  const server = http.createServer(async (req, res) => {
    try {
      if (req.method !== 'POST') {
        reply(res, 405, { error: 'method_not_allowed' }, { allow: 'POST' });
        return;
      }
      let raw: Buffer;
      try {
        raw = await readRawBody(req, maxBodyBytes);
      } catch (err) {
        if (err instanceof BodyTooLargeError) reply(res, 413, { error: 'payload_too_large' });
        else res.destroy();
        return;
      }

      const header = req.headers[SIGNATURE_HEADER];
      let event: WebhookEvent;
      try {
        // The raw bytes, never a re-serialised object.
        event = verifyWebhook(raw, Array.isArray(header) ? header.join(',') : header, secret, {
          toleranceSeconds: options.toleranceSeconds,
          now: options.now,
        });
      } catch (err) {
        if (err instanceof WebhookVerificationError) {
          reply(res, 400, { error: err.reason });
          return;
        }
        throw err;
      }
      if (typeof event.eventId !== 'string' || event.eventId === '') {
        reply(res, 400, { error: 'missing_event_id' });
        return;
      }

      if (seen.has(event.eventId)) {
        reply(res, 200, { received: true, duplicate: true });
        return;
      }
      let accepting = inFlight.get(event.eventId);
      const duplicate = accepting !== undefined;
      if (!accepting) {
        const id = event.eventId;
        const accepted = event;
        // `.finally` runs asynchronously, so the entry is removed only after it has been set, even
        // when onEvent throws synchronously.
        accepting = (async () => {
          await onEvent(accepted);
          seen.add(id);
        })().finally(() => inFlight.delete(id));
        inFlight.set(id, accepting);
      }
      await accepting; // 2xx only once the event is durably accepted
      reply(res, 200, { received: true, duplicate });
    } catch (err) {
      console.error('webhook receiver: could not accept event', err);
      reply(res, 500, { error: 'not_accepted' }); // the sender will retry
    }
  });
  server.requestTimeout = 15_000;
  server.headersTimeout = 10_000;
  return server;
}

/** Appends one line and fsyncs it before returning: the event survives a crash after the 2xx. */
async function appendDurably(file: string, line: string): Promise<void> {
  const fh = await open(file, 'a');
  try {
    await fh.appendFile(line);
    await fh.datasync();
  } finally {
    await fh.close();
  }
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

if (isMain()) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error('WEBHOOK_SECRET is required');
    process.exit(1);
  }
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? '127.0.0.1';
  const file = process.env.EVENTS_FILE;
  const server = createReceiver({
    secret,
    onEvent: async (event) => {
      if (file) await appendDurably(file, `${JSON.stringify(event)}\n`);
      else console.log(`accepted ${event.type} ${event.eventId} (set EVENTS_FILE to store events durably)`);
    },
  });
  server.listen(port, host, () => {
    const address = server.address();
    const shown = typeof address === 'object' && address ? `${address.address}:${address.port}` : String(address);
    console.log(`webhook receiver listening on http://${shown}`);
  });
  const stop = () => server.close(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
