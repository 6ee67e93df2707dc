import type { FastifyInstance } from 'fastify';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Db } from '../db/driver.js';
import { DomainError } from '../errors.js';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { GroupCommit } from '../util/group-commit.js';
import { jobsChannel } from '../jobs/queue.js';
import { CALLBACK_TASK, callbackRepo } from './callback-repo.js';
import { isMessagingEnvelope, isWhatsAppEnvelope } from './providers/meta/payload-schemas.js';
import { verifyMetaSignature } from './providers/meta/signature.js';

/** The objects Meta posts callbacks for (decisions 7.1). */
const META_OBJECTS = new Set(['whatsapp_business_account', 'page', 'instagram']);
/** Meta batches up to 1,000 updates a callback; the cap leaves room for long texts. */
const MAX_CALLBACK_BYTES = 16 * 1024 * 1024;
const PATHS = ['/providers/meta/webhook', '/providers/whatsapp/webhook'];
/** Callbacks stored together at most (their bodies are small, usually one message each), and groups written at once. */
const STORE_GROUP = { maxGroup: 64, maxInFlight: 2, minBeside: 1 };

/** The envelope only (object, entries, changes or messaging lists): items are checked one by one by the parser in the job. */
function envelopeObject(payload: unknown): string | undefined {
  if (isWhatsAppEnvelope(payload)) return payload.object;
  if (isMessagingEnvelope(payload) && META_OBJECTS.has(payload.object)) return payload.object;
  return undefined;
}

/**
 * Meta's callbacks (decisions 7.1): the subscription handshake, and signed callbacks verified on the raw bytes
 * (401 before anything is parsed or written), checked as an envelope (400, nothing stored), stored durably with
 * their processing job in one transaction and answered 200 at once; the workers process them
 * (src/channels/callbacks.ts). `/providers/whatsapp/webhook` is the earlier path, kept as an alias.
 */
export function metaCallbackRoutes(config: Config, db: Db, clock: Clock) {
  // Callbacks arriving together are stored by one statement committed on its own (a burst of Meta's retries or a busy
  // number's traffic costs one round trip and one commit per group, not per callback); each is answered once its
  // group committed.
  const wakeChannel = jobsChannel(CALLBACK_TASK);
  const notifyName = db.notifyName(wakeChannel);
  const stores = new GroupCommit<{ provider: string; object: string; body: string }, string>(
    async (callbacks) => {
      const ids = await callbackRepo.store(db, callbacks, clock.now(), notifyName);
      db.wake(wakeChannel);
      return ids;
    },
    { ...STORE_GROUP, retryAlone: (error) => !isDatabaseUnavailable(error) },
  );
  return async (app: FastifyInstance): Promise<void> => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_CALLBACK_BYTES }, (_request, body, done) => done(null, body));

    for (const path of PATHS) {
      app.get(path, { schema: { hide: true } }, async (request, reply) => {
        const query = request.query as Record<string, string | undefined>;
        const expected = config.meta.verifyToken;
        if (!expected || query['hub.mode'] !== 'subscribe' || query['hub.verify_token'] !== expected) {
          throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'verification token mismatch');
        }
        return reply.type('text/plain').send(query['hub.challenge'] ?? '');
      });

      app.post(path, { schema: { hide: true }, bodyLimit: MAX_CALLBACK_BYTES }, async (request) => {
        const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        if (!config.meta.appSecret || !verifyMetaSignature(config.meta.appSecret, raw, request.headers['x-hub-signature-256'])) {
          throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'X-Hub-Signature-256 does not match');
        }
        const text = raw.toString('utf8');
        let payload: unknown;
        try {
          payload = JSON.parse(text);
        } catch {
          throw new DomainError('M2M_INVALID_REQUEST', 'body is not valid JSON');
        }
        const object = envelopeObject(payload);
        if (!object) throw new DomainError('M2M_INVALID_REQUEST', 'not a Meta callback of a known object (whatsapp_business_account, page, instagram)');
        await stores.submit({ provider: 'meta', object, body: text });
        return { received: true };
      });
    }
  };
}
