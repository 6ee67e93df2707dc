import { Type, type Static } from 'typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../errors.js';
import { Strict } from '../../http/schemas.js';
import { streamVisitor } from './stream.js';
import { WIDGET_JS } from './widget.js';
import type { WebchatService } from './service.js';

const PREFIX = '/webchat/v1';
const Token = Type.String({ minLength: 1, maxLength: 512 });
const EventId = Type.String({ pattern: '^[0-9]{1,18}$', description: 'a stream event id (the eventId of a message)' });

const SessionBody = Type.Object({ widgetId: Type.String({ minLength: 1, maxLength: 200 }), name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }, Strict);
// Code points are counted by the service; the schema's bound (UTF-16 units) only keeps hostile bodies small.
const MessageBody = Type.Object({ text: Type.String({ minLength: 1, maxLength: 8192 }) }, Strict);
const TokenQuery = Type.Object({ sessionToken: Type.Optional(Token) }, Strict);
const ListQuery = Type.Object({ sessionToken: Type.Optional(Token), after: Type.Optional(EventId) }, Strict);
const MediaParams = Type.Object({ mediaId: Type.String({ minLength: 1, maxLength: 100 }) }, Strict);

const CORS_HEADERS = {
  'access-control-allow-methods': 'GET, POST, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, last-event-id, x-request-id',
  'access-control-expose-headers': 'x-request-id, retry-after',
  'access-control-max-age': '600',
};

function originOf(request: FastifyRequest): string | undefined {
  const origin = request.headers.origin;
  return typeof origin === 'string' && origin.length > 0 ? origin : undefined;
}

function tokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header === 'string' && header.startsWith('Bearer ')) return header.slice('Bearer '.length).trim();
  const query = request.query as { sessionToken?: string } | undefined;
  return query?.sessionToken;
}

/**
 * The webchat visitor API and widget (decisions 7.3), outside the API-key catalogue: visitors hold session tokens,
 * not keys. CORS answers (preflights too) only for allowed origins: a preflight names no widget, so it is answered
 * for origins some webchat channel allows; each request is then held to its own widget's origins (403).
 */
export function webchatRoutes(service: WebchatService) {
  return async (app: FastifyInstance): Promise<void> => {
    const allowOrigin = (reply: FastifyReply, origin: string) => reply.header('access-control-allow-origin', origin).header('vary', 'Origin').headers(CORS_HEADERS);
    const allowedAnywhere = async (request: FastifyRequest, reply: FastifyReply) => {
      const origin = originOf(request);
      if (origin && (await service.originAllowedAnywhere(origin))) allowOrigin(reply, origin);
    };

    app.addHook('onRequest', async (request, reply) => {
      if (request.method === 'OPTIONS') await allowedAnywhere(request, reply);
    });
    // A visitor's request is answered for the origins of its own widget (set in `visitor`, which has checked the
    // origin against them); an answer given before that (a new session, an error) as a preflight is.
    app.addHook('onSend', async (request, reply, payload) => {
      if (request.method !== 'OPTIONS' && !request.url.startsWith(`${PREFIX}/widget.js`) && !reply.hasHeader('access-control-allow-origin')) {
        await allowedAnywhere(request, reply);
      }
      return payload;
    });

    const visitor = async (request: FastifyRequest, reply: FastifyReply, options: { originOptional?: boolean } = {}) => {
      const origin = originOf(request);
      const session = await service.authenticate(tokenOf(request), origin, options);
      // authenticate refused any origin its widget does not allow.
      if (origin) allowOrigin(reply, origin);
      return session;
    };

    app.options(`${PREFIX}/*`, { schema: { hide: true } }, async (request, reply) => {
      if (!reply.hasHeader('access-control-allow-origin')) {
        throw new DomainError('M2M_AUTH_INSUFFICIENT_SCOPE', 'this origin may not use the webchat API', { reason: 'origin_not_allowed' });
      }
      return reply.status(204).send();
    });

    app.get(`${PREFIX}/widget.js`, { schema: { hide: true } }, async (_request, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').header('x-content-type-options', 'nosniff').send(WIDGET_JS),
    );

    app.post(`${PREFIX}/sessions`, { schema: { hide: true, body: SessionBody, querystring: Type.Object({}, Strict) } }, async (request, reply) => {
      const body = request.body as Static<typeof SessionBody>;
      const created = await service.createSession(body, originOf(request));
      return reply.status(201).send(created);
    });

    app.post(`${PREFIX}/messages`, { schema: { hide: true, body: MessageBody, querystring: TokenQuery } }, async (request, reply: FastifyReply) => {
      const session = await visitor(request, reply);
      const result = await service.postMessage(session, (request.body as Static<typeof MessageBody>).text);
      if ('retryAfterSeconds' in result) {
        reply.header('retry-after', String(result.retryAfterSeconds));
        throw new DomainError('M2M_RATE_LIMITED', 'too many messages from this session; wait a moment', { retryAfterSeconds: result.retryAfterSeconds });
      }
      return reply.status(201).send({ messageId: result.messageId });
    });

    app.get(`${PREFIX}/messages`, { schema: { hide: true, querystring: ListQuery } }, async (request, reply) => {
      const session = await visitor(request, reply);
      await service.touch(session);
      return { messages: await service.messages(session, (request.query as Static<typeof ListQuery>).after ?? '0') };
    });

    app.get(`${PREFIX}/stream`, { schema: { hide: true, querystring: ListQuery } }, async (request, reply) => {
      const session = await visitor(request, reply);
      await service.touch(session);
      await streamVisitor(service, session, (request.query as Static<typeof ListQuery>).after, request, reply);
    });

    app.get(`${PREFIX}/media/:mediaId`, { schema: { hide: true, params: MediaParams, querystring: TokenQuery } }, async (request, reply) => {
      const session = await visitor(request, reply, { originOptional: true });
      const media = await service.media(session, (request.params as Static<typeof MediaParams>).mediaId);
      if (!media) throw new DomainError('M2M_NOT_FOUND', 'file not found');
      const safeName = media.filename.replace(/["\\\r\n]/g, '_');
      return reply
        .type(media.content_type)
        .header('content-disposition', `${media.content_type.startsWith('image/') ? 'inline' : 'attachment'}; filename="${safeName}"`)
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "default-src 'none'; sandbox")
        .send(Buffer.from(media.bytes));
    });
  };
}
