/**
 * An automatic-reply integration (spec, Events): it answers each inbound guest message once.
 *
 *   M2M_API_KEY=m2m_live_… M2M_BASE_URL=http://127.0.0.1:8080/m2m/v1 WEBHOOK_SECRET=whsec_… PORT=3000 \
 *     node --import tsx packages/client/examples/auto-reply.ts
 *
 * Subscribe it to `message.created` with a key holding conversations:read; the client's key needs
 * conversations:write (and knowledge:read, reservations:read for the answers below). For each delivery it:
 *   1. verifies the signature over the RAW body before parsing anything;
 *   2. acts only on inbound `message.created` (its own replies arrive as outbound ones and are ignored, so
 *      it never answers itself);
 *   3. fetches the message (events carry ids, content is read through the API);
 *   4. replies with `Idempotency-Key` = the event id, so a redelivered event, a retry after a timeout or a
 *      second replica handling the same event all produce one reply (the API replays the first answer);
 *   5. stores the event id once handled, and answers 2xx only then (a 5xx makes the sender retry).
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

export type Outcome =
  | { eventId: string; action: 'replied'; conversationId: string; messageId: string; replyId: string; requestEventId: string }
  | { eventId: string; action: 'ignored' | 'duplicate' }
  | { eventId: string; action: 'refused'; code: string; reason?: string };

/** The reply to a guest's message; undefined sends none. */
export type Compose = (message: Message) => string | undefined | Promise<string | undefined>;

export interface AutoReplyOptions {
  client: M2MClient;
  /** The subscription's signing secret (`whsec_…`). */
  secret: string;
  /** The reply to a guest's message; undefined sends none. Default: `knowledgeReply(client)`. */
  compose?: Compose;
  handled?: HandledEvents;
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

function answer(res: http.ServerResponse, status: number, body: Record<string, unknown>): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function field(data: Record<string, unknown>, name: string): string | undefined {
  const value = data[name];
  return typeof value === 'string' ? value : undefined;
}

export function createAutoReplier(options: AutoReplyOptions): http.Server {
  const { client, secret } = options;
  const compose = options.compose ?? knowledgeReply(client);
  const handled = options.handled ?? new Set<string>();
  const report = options.onOutcome ?? ((outcome: Outcome) => console.log(JSON.stringify(outcome)));

  async function handle(eventId: string, type: string, data: Record<string, unknown>): Promise<Outcome> {
    const conversationId = field(data, 'conversationId');
    const messageId = field(data, 'messageId');
    if (type !== 'message.created' || data.direction !== 'inbound' || !conversationId || !messageId) return { eventId, action: 'ignored' };
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

  return http.createServer(async (req, res) => {
    try {
      const raw = await readRawBody(req);
      const header = req.headers[SIGNATURE_HEADER];
      const event = verifyWebhook(raw, Array.isArray(header) ? header.join(',') : header, secret);
      if (await handled.has(event.eventId)) {
        report({ eventId: event.eventId, action: 'duplicate' });
        answer(res, 200, { duplicate: true });
        return;
      }
      const outcome = await handle(event.eventId, event.type, event.data);
      await handled.add(event.eventId);
      report(outcome);
      answer(res, 200, { action: outcome.action });
    } catch (error) {
      if (error instanceof WebhookVerificationError) answer(res, 400, { error: error.reason });
      else {
        console.error('auto-reply: event not handled, the sender will retry', error instanceof Error ? error.message : error);
        answer(res, 500, { error: 'not_handled' });
      }
    }
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
  const stop = () => server.close(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
