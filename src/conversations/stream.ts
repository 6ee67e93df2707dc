import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../db/driver.js';
import { iso } from '../util/time.js';
import { ACTIVITY_CHANNEL } from './actor.js';
import { conversationRepo } from './repo.js';

const BATCH = 500;
const HEARTBEAT_MS = 15_000;
/** Fallback for a lost wake-up (another node's commit when LISTEN dropped). */
const POLL_MS = 5_000;

/**
 * Server-sent events of a tenant's conversation activity, pushed as they commit. Each event's id is the
 * activity id, so a client reconnecting with Last-Event-ID misses nothing.
 */
export async function streamActivity(db: Db, tenantId: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const header = request.headers['last-event-id'];
  const resumeFrom = typeof header === 'string' && /^\d+$/.test(header.trim()) ? Number(header.trim()) : NaN;
  let lastId = Number.isSafeInteger(resumeFrom) ? resumeFrom : await conversationRepo.latestActivityId(db, tenantId);

  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-request-id': request.id,
  });
  res.write(': connected\n\n');

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
      let rows;
      do {
        again = false;
        rows = await conversationRepo.activitySince(db, tenantId, lastId, BATCH);
        for (const row of rows) {
          const data = { conversationId: row.conversation_id, kind: row.kind, actor: { type: row.actor_type, id: row.actor_id }, data: row.data, occurredAt: iso(row.created_at) };
          res.write(`id: ${row.id}\nevent: ${row.kind}\ndata: ${JSON.stringify(data)}\n\n`);
          lastId = row.id;
        }
      } while (!closed && (again || rows.length === BATCH));
    } catch (error) {
      request.log.warn({ err: error }, 'activity stream read failed; will retry');
    } finally {
      running = false;
    }
  };

  const unlisten = await db.listen(ACTIVITY_CHANNEL, () => void flush());
  const heartbeat = setInterval(() => res.write(': ping\n\n'), HEARTBEAT_MS);
  const poll = setInterval(() => void flush(), POLL_MS);
  request.raw.on('close', () => {
    closed = true;
    unlisten();
    clearInterval(heartbeat);
    clearInterval(poll);
  });
  await flush();
}
