import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { DomainError } from '../errors.js';
import type { MessagingService } from './service.js';
import { parseStatusCallback, verifyHubSignature } from './providers/whatsapp.js';

/**
 * WhatsApp Cloud API callbacks at /providers/whatsapp/webhook: the GET verification handshake and
 * signed status updates. The raw body is verified before it is parsed.
 */
export function whatsappCallbackRoutes(config: Config, messaging: MessagingService) {
  return async (app: FastifyInstance): Promise<void> => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 1024 * 1024 }, (_request, body, done) => done(null, body));

    app.get('/providers/whatsapp/webhook', { schema: { hide: true } }, async (request, reply) => {
      const query = request.query as Record<string, string | undefined>;
      if (!config.whatsapp.verifyToken || query['hub.mode'] !== 'subscribe' || query['hub.verify_token'] !== config.whatsapp.verifyToken) {
        throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'verification token mismatch');
      }
      return reply.type('text/plain').send(query['hub.challenge'] ?? '');
    });

    app.post('/providers/whatsapp/webhook', { schema: { hide: true } }, async (request) => {
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const header = request.headers['x-hub-signature-256'];
      if (!config.whatsapp.appSecret || !verifyHubSignature(config.whatsapp.appSecret, raw, typeof header === 'string' ? header : undefined)) {
        throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'X-Hub-Signature-256 does not match');
      }
      let payload: unknown;
      try {
        payload = JSON.parse(raw.toString('utf8'));
      } catch {
        throw new DomainError('M2M_INVALID_REQUEST', 'body is not valid JSON');
      }
      const applied = await messaging.applyProviderCallbacks('whatsapp', parseStatusCallback(payload));
      return { received: true, applied };
    });
  };
}
