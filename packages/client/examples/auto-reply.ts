/**
 * An automatic-reply integration (spec, Events): it answers each inbound guest message once.
 *
 *   M2M_API_KEY=m2m_live_… M2M_BASE_URL=http://127.0.0.1:8080/m2m/v1 WEBHOOK_SECRET=whsec_… PORT=3000 \
 *     node --import tsx packages/client/examples/auto-reply.ts
 *
 * Subscribe it to `message.created` with a key holding conversations:read; the client's key needs
 * conversations:write. For each delivery it:
 *   1. verifies the signature over the RAW body before parsing anything;
 *   2. acts only on inbound `message.created` (its own replies arrive as outbound ones and are ignored, so
 *      it never answers itself);
 *   3. fetches the message (events carry ids, content is read through the API);
 *   4. replies with `Idempotency-Key` = the event id, so a redelivered event, a retry after a timeout or a
 *      second replica handling the same event all produce one reply (the API replays the first answer);
 *   5. stores the event id once handled, and answers 2xx only then (a 5xx makes the sender retry).
 */
import http from 'node:http';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
// In an application: import { M2MClient, verifyWebhook, … } from '@m2m/client';
import { ApiError, M2MClient, SIGNATURE_HEADER, WebhookVerificationError, verifyWebhook, type GetConversationMessageResponse } from '../src/index.js';

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

export interface AutoReplyOptions {
  client: M2MClient;
  /** The subscription's signing secret (`whsec_…`). */
  secret: string;
  /** The reply to a guest's message; undefined sends none. */
  compose?: (message: Message) => string | undefined;
  handled?: HandledEvents;
  onOutcome?: (outcome: Outcome) => void;
}

const defaultCompose = () => 'Thanks for your message! A member of our team will answer shortly.';

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
  const compose = options.compose ?? defaultCompose;
  const handled = options.handled ?? new Set<string>();
  const report = options.onOutcome ?? ((outcome: Outcome) => console.log(JSON.stringify(outcome)));

  async function handle(eventId: string, type: string, data: Record<string, unknown>): Promise<Outcome> {
    const conversationId = field(data, 'conversationId');
    const messageId = field(data, 'messageId');
    if (type !== 'message.created' || data.direction !== 'inbound' || !conversationId || !messageId) return { eventId, action: 'ignored' };
    const { message } = await client.conversations.messages.get({ conversationId, messageId });
    const text = compose(message);
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
