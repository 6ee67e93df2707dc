import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import type { Services } from '../services.js';
import { IdempotencyHeaders, RequestParams, RequestStatusRecord, StartAccepted, StartBody, TemplateReadiness, TemplateStatusQuery } from './schema.js';

/** Conversation start and message request status: thin routes over MessagingService. */
export function messagingRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { messaging } = services;

    app.get('/conversations/start/whatsapp-template-status', {
      config: { scopes: ['conversations:read'] },
      schema: {
        tags: ['Conversations'],
        summary: 'Persisted readiness of the WhatsApp conversation-start template (read-only)',
        querystring: TemplateStatusQuery,
        response: { 200: TemplateReadiness, ...errorResponses(404) },
      },
    }, async (request) => messaging.templateStatus(principalOf(request).tenantId, request.query.channelId));

    app.post('/conversations/start', {
      config: { scopes: ['conversations:write'] },
      schema: {
        tags: ['Conversations'],
        summary: 'Start a conversation with a WhatsApp template message (queued, not delivered)',
        headers: IdempotencyHeaders,
        body: StartBody,
        response: { 202: StartAccepted, ...errorResponses(404, 409) },
      },
    }, async (request, reply) => {
      const result = await messaging.start(principalOf(request), request.headers['idempotency-key'], request.body);
      if (result.replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.status(202).send(result.body);
    });

    app.get('/message-requests/:requestEventId/status', {
      config: { scopes: ['messages:read'] },
      schema: { tags: ['Messages'], summary: 'Status of a queued send', params: RequestParams, response: { 200: RequestStatusRecord, ...errorResponses(404) } },
    }, async (request) => messaging.requestStatus(principalOf(request).tenantId, request.params.requestEventId));

    app.post('/message-requests/:requestEventId/reconcile', {
      config: { scopes: ['conversations:write'] },
      schema: {
        tags: ['Messages'],
        summary: 'Acknowledge a failed send so new sends to its recipient are allowed',
        params: RequestParams,
        response: { 200: RequestStatusRecord, ...errorResponses(404, 409) },
        'x-extension': true,
      },
    }, async (request) => messaging.reconcile(principalOf(request).tenantId, request.params.requestEventId));
  };
}
