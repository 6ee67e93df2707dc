import type { FastifyReply, FastifyRequest } from 'fastify';
import { webchatRepo, type HubEventRow, type WebchatEventRow } from './repo.js';
import { visitorMessage, type VisitorSession, type WebchatService } from './service.js';

const BATCH = 200;
const HEARTBEAT_MS = 15_000;
/** A last resort per stream; the hub's reads (and its own poll) carry everything in the usual case. */
const POLL_MS = 60_000;
const EVENT_ID = /^\d{1,18}$/;

/** The SSE frame of one stream row: `message`, `typing`, `read` (decisions 7.3) and `reaction`. */
function frame(row: WebchatEventRow): string {
  const data = row.kind === 'message' ? visitorMessage(row) : row.data;
  return `id: ${row.id}\nevent: ${row.kind}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * A visitor's live stream. Each event's id is its row id in the visitor's stream; the rows of one visitor commit
 * in id order (src/channels/sql/webchat_lock_visitor.sql), so a client that reconnects with `Last-Event-ID` (or
 * first connects with `?after=`, the last id it read from GET /messages) gets exactly what it has not seen.
 * Without either it starts at the newest event. Every node's commits reach it through the process's hub (one
 * LISTEN, one read per wake-up), which hands each stream its visitor's new rows: written as they are when they follow
 * on from the last one written (the row's `prev_id` is at most that one), else the stream reads its rows after that
 * one itself, so nothing is skipped.
 */
export async function streamVisitor(service: WebchatService, visitor: VisitorSession, after: string | undefined, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { db } = service;
  const { session } = visitor;
  const header = request.headers['last-event-id'];
  const resume = typeof header === 'string' && EVENT_ID.test(header.trim()) ? header.trim() : after;
  let lastId = resume ?? (await webchatRepo.latestEventId(db, session.id, session.widget_id));

  reply.hijack();
  const res = reply.raw;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) if (typeof value === 'string') headers[name] = value;
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-request-id': request.id,
  });
  // retry: how long the browser waits before reconnecting with Last-Event-ID.
  res.write(': connected\nretry: 2000\n\n');

  let closed = false;
  let running = false;
  let again = false;
  const flush = async (): Promise<void> => {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      let rows: WebchatEventRow[];
      do {
        again = false;
        rows = await webchatRepo.eventsAfter(db, session.id, session.widget_id, lastId, BATCH);
        for (const row of rows) {
          res.write(frame(row));
          lastId = row.id;
        }
      } while (!closed && (again || rows.length === BATCH));
    } catch (error) {
      request.log.warn({ err: error }, 'webchat stream read failed; will retry');
    } finally {
      running = false;
    }
  };

  const take = (rows: readonly HubEventRow[]): void => {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    for (const row of rows) {
      if (BigInt(row.id) <= BigInt(lastId)) continue;
      if (row.prev_id !== null && BigInt(row.prev_id) > BigInt(lastId)) {
        void flush();
        return;
      }
      res.write(frame(row));
      lastId = row.id;
    }
  };

  const unsubscribe = await service.hub.subscribe(session.id, take);
  const heartbeat = setInterval(() => res.write(': ping\n\n'), HEARTBEAT_MS);
  const poll = setInterval(() => void flush(), POLL_MS);
  request.raw.on('close', () => {
    closed = true;
    unsubscribe();
    clearInterval(heartbeat);
    clearInterval(poll);
  });
  await flush();
}
