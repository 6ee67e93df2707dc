/**
 * Webhook receiver for the bench, run as its own child process so its CPU is not the bench's.
 * Answers every POST with 200 at once (keep-alive) and records, per x-service-event-id, the arrival
 * time (Date.now()) and the event's occurredAt. Control routes (127.0.0.1 only):
 *   GET  /stats     → { count, unique, duplicates, first, last }
 *   GET  /arrivals  → { [eventId]: [arrivalMs, occurredAtMs | null, data.messageId | null] }
 *   POST /reset     → forget everything
 * Listens on RECEIVER_HOST (default 127.0.0.1). Tells its parent the port over IPC; exits on SIGTERM or when the parent goes away.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let arrivals = new Map<string, [number, number | null, string | null]>();
let count = 0;
let first = 0;
let last = 0;

function reset(): void {
  arrivals = new Map();
  count = 0;
  first = 0;
  last = 0;
}

function occurredAt(body: string): number | null {
  const match = /"occurredAt"\s*:\s*"([^"]+)"/.exec(body);
  if (!match) return null;
  const ms = Date.parse(match[1]);
  return Number.isNaN(ms) ? null : ms;
}

function messageId(body: string): string | null {
  return /"messageId"\s*:\s*"([^"]+)"/.exec(body)?.[1] ?? null;
}

function json(res: http.ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    json(res, { count, unique: arrivals.size, duplicates: count - arrivals.size, first, last });
    return;
  }
  if (req.method === 'GET' && req.url === '/arrivals') {
    json(res, Object.fromEntries(arrivals));
    return;
  }
  if (req.method === 'POST' && req.url === '/reset') {
    req.resume();
    reset();
    json(res, { ok: true });
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const at = Date.now();
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 }).end('ok');
    const id = req.headers['x-service-event-id'];
    if (typeof id !== 'string') return;
    count += 1;
    if (first === 0) first = at;
    last = at;
    if (!arrivals.has(id)) {
      const body = Buffer.concat(chunks).toString('utf8');
      arrivals.set(id, [at, occurredAt(body), messageId(body)]);
    }
  });
});
server.keepAliveTimeout = 60_000;

function stop(): void {
  server.closeAllConnections();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1_000).unref();
}

process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('disconnect', stop);

server.listen(0, process.env.RECEIVER_HOST ?? '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.send?.({ port });
});
