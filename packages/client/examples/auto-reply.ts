/**
 * An automatic-reply integration (spec, Events): it answers each inbound guest message once.
 *
 *   M2M_API_KEY=m2m_live_… M2M_BASE_URL=http://127.0.0.1:8080/m2m/v1 WEBHOOK_SECRET=whsec_… PORT=3000 \
 *     node --import tsx packages/client/examples/auto-reply.ts
 *
 * Subscribe it to `message.created` with a key holding conversations:read; the client's key needs
 * conversations:write (and knowledge:read, reservations:read for the answers below). For each delivery it:
 *   1. verifies the signature over the RAW body before parsing anything;
 *   2. answers at once what needs no API call: an event already handled or already accepted (a duplicate), and
 *      every event but an inbound `message.created` (its own replies arrive as outbound ones and are ignored, so it
 *      never answers itself);
 *   3. accepts an inbound message: adds it to the accepted events and answers 2xx straight away, without waiting
 *      for the reply. The sender keeps a bounded number of requests in flight per destination host, so a receiver
 *      that did its work inside the request would cap the events it gets per second at that number divided by the
 *      time its work takes. With `maxPending` events accepted and not yet handled it answers 503 instead: the
 *      event stays with the sender, which retries later;
 *   4. handles accepted events, `concurrency` at a time: fetches the message (events carry ids, content is read
 *      through the API), composes the answer and replies with `Idempotency-Key` = the event id, so a retry, a
 *      redelivered event or a second replica handling the same event all produce one reply (the API replays the
 *      first answer). A transient failure (the API unreachable, 429, 5xx) is tried again after each of
 *      `retryDelaysMs`; an event it gives up on is logged and reported as `failed` with its id, never dropped
 *      without a word (`GET /events/{eventId}` reads it again);
 *   5. stores the event id once handled.
 *
 * What a crash loses: by default the accepted events wait in memory. If the process dies, those it acknowledged
 * and had not yet handled are gone from it, and the sender, which counts them delivered, will not send them again
 * (they stay readable in the catch-up feed, `GET /events`, for 30 days). In production pass `accepted` backed by
 * durable storage: one row per event (the event id as primary key, its type and data) inserted before the 2xx,
 * deleted once handled, and read back at start (`pending`); and `handled` as a unique index of event ids kept
 * longer than the sender's ~35 h retry window.
 *
 * What it answers (`knowledgeReply`, the default): the passage of the business's knowledge that best answers the
 * guest's question (`POST /knowledge/search`) and its link, plus the guest's linked reservation (check-in date)
 * when the question is about the stay; when nothing scores at least `minScore`, it hands over: it opens nothing
 * and answers a fixed line, leaving the question to the team. The client's key then also needs knowledge:read
 * (without it every question is handed over) and reservations:read (without it the reservation is left out).
 */
import http from 'node:http';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
// In an application: import { M2MClient, verifyWebhook, … } from '@m2m/client';
import { ApiError, M2MClient, SIGNATURE_HEADER, WebhookVerificationError, verifyWebhook, type GetConversationMessageResponse, type SearchKnowledgeResponse } from '../src/index.js';

type Message = GetConversationMessageResponse['message'];

/** Event ids already handled. Production keeps them durably (a unique index), longer than the ~35 h retry window. */
export interface HandledEvents {
  has(eventId: string): boolean | Promise<boolean>;
  add(eventId: string): void | Promise<void>;
}

/** An inbound message event acknowledged to the sender and waiting to be handled. */
export interface AcceptedEvent {
  eventId: string;
  type: string;
  data: Record<string, unknown>;
}

/** Where accepted events wait until handled (see the top of this file for what an in-memory one loses). */
export interface AcceptedEvents {
  /** Before the delivery is acknowledged: a rejection answers 500 and the sender retries. */
  add(event: AcceptedEvent): void | Promise<void>;
  /** Once handled (replied, ignored or refused). */
  remove(eventId: string): void | Promise<void>;
  /** At start: the events accepted before and never handled (a restart), handled first. */
  pending(): Iterable<AcceptedEvent> | Promise<Iterable<AcceptedEvent>>;
}

/** After a transient failure, how long an accepted event waits before each further attempt (milliseconds). */
export const RETRY_DELAYS_MS: readonly number[] = [1_000, 5_000, 30_000, 120_000, 600_000];

export type Outcome =
  | { eventId: string; action: 'replied'; conversationId: string; messageId: string; replyId: string; requestEventId: string }
  | { eventId: string; action: 'ignored' | 'duplicate' }
  | { eventId: string; action: 'refused'; code: string; reason?: string }
  | { eventId: string; action: 'failed'; error: string };

/** The reply to a guest's message; undefined sends none. */
export type Compose = (message: Message) => string | undefined | Promise<string | undefined>;

export interface AutoReplyOptions {
  client: M2MClient;
  /** The subscription's signing secret (`whsec_…`). */
  secret: string;
  /** The reply to a guest's message; undefined sends none. Default: `knowledgeReply(client)`. */
  compose?: Compose;
  handled?: HandledEvents;
  /** Where accepted events wait; default: in memory. */
  accepted?: AcceptedEvents | Map<string, AcceptedEvent>;
  /** How many accepted events are handled at once. Default 64 (what the sender keeps in flight per host by default). */
  concurrency?: number;
  /** How many events may be accepted and not yet handled; beyond it deliveries get 503. Default 10,000. */
  maxPending?: number;
  /** Default RETRY_DELAYS_MS. */
  retryDelaysMs?: readonly number[];
  onOutcome?: (outcome: Outcome) => void;
}

/** The fixed line a question gets when the knowledge has no good answer: the team takes it from there. */
export const HANDOVER_LINE = 'Thanks for your message! A member of our team will answer shortly.';

export interface KnowledgeReplyOptions {
  /** The least search score (0..1) a passage needs to be sent; below it the question is handed over. */
  minScore?: number;
  /** Search this property's knowledge (and global knowledge) only. */
  propertyId?: string;
  /** The line sent when handing over. */
  handover?: string;
}

/**
 * The score a passage needs. A result's score counts the share of the question's rarer words the passage holds,
 * fused with its vector similarity, so it means the same from one question to the next. On the hotel benchmark
 * (bench/search.ts) off-topic questions ("a good dentist nearby?") scored at most 0.21 and three in four of the
 * answerable ones 0.2 or more. Raise it to hand over more.
 */
export const MIN_SCORE = 0.2;

/** Questions about the guest's own stay: their arrival, check-in or booking (English and Spanish). */
const ABOUT_THE_STAY = /\b(check[\s-]?in|arriv(e|al|ing)|reservation|booking|my stay|our stay|llega(da|mos|r)?|llego|reserva(ci[oó]n)?|entrada|estancia)\b/i;

/** The first sentences of a passage (its heading marks dropped), up to about `max` characters. */
function excerpt(text: string, max = 600): string {
  const clean = text.replace(/^#+\s*/gm, '').replace(/\s+/g, ' ').trim();
  if (clean.length <= max) return clean;
  const cut = clean.slice(0, max);
  const end = Math.max(cut.lastIndexOf('. '), cut.lastIndexOf('? '), cut.lastIndexOf('! '));
  return end > max / 3 ? cut.slice(0, end + 1) : `${cut.trimEnd()}…`;
}

/** A search query of at most 500 characters (code points), as the API accepts. */
const asQuery = (text: string) => Array.from(text.trim()).slice(0, 500).join('');

/**
 * Answers a guest's question from the business's knowledge: the best passage and its link, and their check-in
 * date when they ask about their stay; below `minScore` (or a message with no text) the fixed handover line.
 * A key without knowledge:read or reservations:read (403) leaves that part out rather than failing the event.
 */
export function knowledgeReply(client: M2MClient, options: KnowledgeReplyOptions = {}): Compose {
  const minScore = options.minScore ?? MIN_SCORE;
  const handover = options.handover ?? HANDOVER_LINE;
  return async (message) => {
    const question = message.text ? asQuery(message.text) : '';
    if (question.length === 0) return handover;
    let best: SearchKnowledgeResponse['results'][number] | undefined;
    try {
      const { results } = await client.knowledge.search({ query: question, limit: 1, ...(options.propertyId ? { propertyId: options.propertyId } : {}) });
      best = results[0];
    } catch (error) {
      // A key without knowledge:read (403), or text the search refuses (400, e.g. a control character): no answer
      // from the knowledge, so hand over rather than fail the event into endless redeliveries.
      if (error instanceof ApiError && (error.status === 403 || error.status === 400)) return handover;
      throw error;
    }
    if (!best || best.score < minScore) return handover;
    const parts = [excerpt(best.text), ...(best.url ? [`More: ${best.url}`] : [])];
    if (ABOUT_THE_STAY.test(question)) {
      const stay = await linkedStay(client, message.conversationId);
      if (stay) parts.unshift(`Your reservation ${stay.providerReservationId}: check-in on ${stay.checkInDate}, check-out on ${stay.checkOutDate}.`);
    }
    return parts.join('\n\n');
  };
}

/** The guest's reservation for the stay being asked about: the linked one (by phone) that is not cancelled, latest check-in first. */
async function linkedStay(client: M2MClient, conversationId: string) {
  try {
    const { reservations } = await client.reservations.forConversation({ conversationId });
    return reservations.find((r) => r.status !== 'cancelled');
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) return undefined;
    throw error;
  }
}

function readRawBody(req: http.IncomingMessage, limit = 1024 * 1024): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) req.destroy(new Error('body too large'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function answer(res: http.ServerResponse, status: number, body: Record<string, unknown>, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

function field(data: Record<string, unknown>, name: string): string | undefined {
  const value = data[name];
  return typeof value === 'string' ? value : undefined;
}

/** A failure worth trying again: the API busy or failing (429, 5xx, a reply with the same key still running) or unreachable. */
function transient(error: unknown): boolean {
  if (!(error instanceof ApiError)) return true;
  return error.status === 429 || error.status >= 500 || error.code === 'M2M_IDEMPOTENCY_CONFLICT';
}

function describe(error: unknown): string {
  if (error instanceof ApiError) return `${error.status} ${error.code}`;
  return error instanceof Error ? error.message : String(error);
}

/** The HTTP server, and what it has accepted and not yet handled. */
export interface AutoReplier extends http.Server {
  /** Events accepted and not yet handled (waiting, being handled or waiting to be retried). */
  pending(): number;
  /** Resolves once nothing is pending, or after `timeoutMs` with the event ids still pending. */
  idle(timeoutMs?: number): Promise<string[]>;
}

export function createAutoReplier(options: AutoReplyOptions): AutoReplier {
  const { client, secret } = options;
  const compose = options.compose ?? knowledgeReply(client);
  const handled = options.handled ?? new Set<string>();
  const accepted = options.accepted ?? new Map<string, AcceptedEvent>();
  const store: AcceptedEvents =
    accepted instanceof Map
      ? { add: (event) => void accepted.set(event.eventId, event), remove: (eventId) => void accepted.delete(eventId), pending: () => accepted.values() }
      : accepted;
  const concurrency = options.concurrency ?? 64;
  const maxPending = options.maxPending ?? 10_000;
  const retryDelaysMs = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  const report = options.onOutcome ?? ((outcome: Outcome) => console.log(JSON.stringify(outcome)));

  /** Accepted and not yet handled, by event id: the attempts made so far. */
  const pending = new Map<string, number>();
  const queue: AcceptedEvent[] = [];
  let running = 0;
  const idleWaiters: Array<() => void> = [];

  async function handle(event: AcceptedEvent): Promise<Outcome> {
    const { eventId, data } = event;
    const conversationId = field(data, 'conversationId');
    const messageId = field(data, 'messageId');
    if (!conversationId || !messageId) return { eventId, action: 'ignored' };
    const { message } = await client.conversations.messages.get({ conversationId, messageId });
    const text = await compose(message);
    if (text === undefined) return { eventId, action: 'ignored' };
    try {
      const sent = await client.conversations.messages.reply({ conversationId, text }, { idempotencyKey: eventId });
      return { eventId, action: 'replied', conversationId, messageId, replyId: sent.replyId, requestEventId: sent.requestEventId };
    } catch (error) {
      // A channel rule (the 24-hour window closed, the guest opted out) will not change on a retry: done.
      if (error instanceof ApiError && error.code === 'M2M_CONFLICT') {
        const details = error.details as { reason?: string } | undefined;
        return { eventId, action: 'refused', code: error.code, reason: details?.reason };
      }
      throw error;
    }
  }

  function done(eventId: string): void {
    pending.delete(eventId);
    if (pending.size === 0) for (const wake of idleWaiters.splice(0)) wake();
  }

  /** Handles one accepted event; a transient failure puts it back in line after a delay, the Idempotency-Key keeping one reply. */
  async function work(event: AcceptedEvent): Promise<void> {
    const attempts = (pending.get(event.eventId) ?? 0) + 1;
    pending.set(event.eventId, attempts);
    let outcome: Outcome;
    try {
      outcome = await handle(event);
      await handled.add(event.eventId);
    } catch (error) {
      const delay = retryDelaysMs[attempts - 1];
      if (delay !== undefined && transient(error)) {
        setTimeout(() => {
          queue.push(event);
          pump();
        }, delay).unref();
        return;
      }
      // Given up: said out loud, and left in the store of accepted events (a durable one hands it back at the next start).
      console.error(`auto-reply: event ${event.eventId} not handled after ${attempts} attempt(s): ${describe(error)}`);
      report({ eventId: event.eventId, action: 'failed', error: describe(error) });
      done(event.eventId);
      return;
    }
    await Promise.resolve(store.remove(event.eventId)).catch((error: unknown) => console.error(`auto-reply: event ${event.eventId} handled, not removed from the store: ${describe(error)}`));
    report(outcome);
    done(event.eventId);
  }

  function pump(): void {
    while (running < concurrency) {
      const event = queue.shift();
      if (!event) return;
      running += 1;
      void work(event).finally(() => {
        running -= 1;
        pump();
      });
    }
  }

  function enqueue(event: AcceptedEvent): void {
    if (!pending.has(event.eventId)) pending.set(event.eventId, 0);
    queue.push(event);
    pump();
  }

  // Events a durable store kept from before a restart go first.
  void Promise.resolve(store.pending()).then(
    (events) => {
      for (const event of events) if (!pending.has(event.eventId)) enqueue(event);
    },
    (error: unknown) => console.error(`auto-reply: the accepted events could not be read back: ${describe(error)}`),
  );

  const server = http.createServer(async (req, res) => {
    try {
      const raw = await readRawBody(req);
      const header = req.headers[SIGNATURE_HEADER];
      const event = verifyWebhook(raw, Array.isArray(header) ? header.join(',') : header, secret);
      const { eventId, type, data } = event;
      if (pending.has(eventId) || (await handled.has(eventId))) {
        report({ eventId, action: 'duplicate' });
        answer(res, 200, { duplicate: true });
        return;
      }
      // Its own replies (outbound) and other types need no API call: answered at once.
      if (type !== 'message.created' || data.direction !== 'inbound' || !field(data, 'conversationId') || !field(data, 'messageId')) {
        await handled.add(eventId);
        report({ eventId, action: 'ignored' });
        answer(res, 200, { action: 'ignored' });
        return;
      }
      // Full: not accepted, so the sender keeps the event and tries again later.
      if (pending.size >= maxPending) {
        answer(res, 503, { error: 'busy' }, { 'retry-after': '5' });
        return;
      }
      const accepted: AcceptedEvent = { eventId, type, data };
      // Pending from here, so a concurrent redelivery of the same event is a duplicate.
      pending.set(eventId, 0);
      try {
        await store.add(accepted);
      } catch (error) {
        done(eventId);
        throw error;
      }
      enqueue(accepted);
      answer(res, 200, { accepted: true });
    } catch (error) {
      if (error instanceof WebhookVerificationError) answer(res, 400, { error: error.reason });
      else {
        console.error('auto-reply: event not accepted, the sender will retry', describe(error));
        answer(res, 500, { error: 'not_accepted' });
      }
    }
  });

  return Object.assign(server, {
    pending: () => pending.size,
    idle(timeoutMs = 10_000): Promise<string[]> {
      if (pending.size === 0) return Promise.resolve([]);
      return new Promise<string[]>((resolve) => {
        const timer = setTimeout(() => resolve([...pending.keys()]), timeoutMs);
        idleWaiters.push(() => {
          clearTimeout(timer);
          resolve([]);
        });
      });
    },
  });
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
  const { M2M_API_KEY: apiKey, WEBHOOK_SECRET: secret } = process.env;
  if (!apiKey || !secret) {
    console.error('M2M_API_KEY and WEBHOOK_SECRET are required');
    process.exit(1);
  }
  const client = new M2MClient({ apiKey, baseUrl: process.env.M2M_BASE_URL ?? 'http://127.0.0.1:8080/m2m/v1' });
  const server = createAutoReplier({ client, secret });
  server.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? '127.0.0.1', () => console.log('auto-reply listening', server.address()));
  // Stops taking deliveries, then finishes what was accepted (or says which events it leaves unhandled).
  const stop = () => {
    server.close();
    void server.idle(10_000).then((left) => {
      if (left.length > 0) console.error(`auto-reply: stopping with ${left.length} accepted event(s) not handled: ${left.join(', ')}`);
      process.exit(0);
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
