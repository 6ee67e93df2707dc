import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import type { Services } from '../services.js';
import {
  AttemptList,
  CreateSubscriptionBody,
  DeliveryEnvelope,
  DeliveryList,
  DeliveryListQuery,
  DeliveryParams,
  SubscriptionList,
  SubscriptionParams,
  UpdateSubscriptionBody,
} from './schema.js';

const tags = ['Webhooks'];

/** Public webhook routes: thin, each calls one service method. */
export function webhookRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { webhooks } = services;
    const sub = { $ref: 'WebhookSubscription#' } as const;

    app.post('/webhooks', {
      config: { scopes: ['webhooks:write'] },
      schema: {
        tags,
        summary: 'Create a subscription (also needs the read scope of every selected event type)',
        body: CreateSubscriptionBody,
        response: { 201: sub, ...errorResponses(409) },
      },
    }, async (request, reply) => reply.status(201).send(await webhooks.create(principalOf(request), request.body)));

    app.get('/webhooks', {
      config: { scopes: ['webhooks:read'] },
      schema: { tags, summary: 'List subscriptions', response: { 200: SubscriptionList, ...errorResponses() } },
    }, async (request) => webhooks.list(principalOf(request)));

    app.get('/webhooks/:subscriptionId', {
      config: { scopes: ['webhooks:read'] },
      schema: { tags, summary: 'Read a subscription', params: SubscriptionParams, response: { 200: sub, ...errorResponses(404) } },
    }, async (request) => webhooks.get(principalOf(request), request.params.subscriptionId));

    app.patch('/webhooks/:subscriptionId', {
      config: { scopes: ['webhooks:write'] },
      schema: {
        tags,
        summary: 'Change a subscription; the calling key becomes its owner',
        params: SubscriptionParams,
        body: UpdateSubscriptionBody,
        response: { 200: sub, ...errorResponses(404) },
      },
    }, async (request) => webhooks.update(principalOf(request), request.params.subscriptionId, request.body));

    app.delete('/webhooks/:subscriptionId', {
      config: { scopes: ['webhooks:write'] },
      schema: { tags, summary: 'Delete a subscription', params: SubscriptionParams, response: { 204: { type: 'null' }, ...errorResponses(404) } },
    }, async (request, reply) => {
      await webhooks.remove(principalOf(request), request.params.subscriptionId);
      return reply.status(204).send(null);
    });

    app.post('/webhooks/:subscriptionId/rotate-secret', {
      config: { scopes: ['webhooks:write'] },
      schema: { tags, summary: 'Replace the signing secret', params: SubscriptionParams, response: { 200: sub, ...errorResponses(404) } },
    }, async (request) => webhooks.rotateSecret(principalOf(request), request.params.subscriptionId));

    app.get('/webhooks/:subscriptionId/deliveries', {
      config: { scopes: ['webhooks:read'] },
      schema: {
        tags,
        summary: 'List deliveries, newest first',
        params: SubscriptionParams,
        querystring: DeliveryListQuery,
        response: { 200: DeliveryList, ...errorResponses(404) },
      },
    }, async (request) => webhooks.listDeliveries(principalOf(request), request.params.subscriptionId, request.query));

    app.get('/webhooks/:subscriptionId/deliveries/:deliveryId', {
      config: { scopes: ['webhooks:read'] },
      schema: { tags, summary: 'Read a delivery', params: DeliveryParams, response: { 200: DeliveryEnvelope, ...errorResponses(404) } },
    }, async (request) => webhooks.getDelivery(principalOf(request), request.params.subscriptionId, request.params.deliveryId));

    app.get('/webhooks/:subscriptionId/deliveries/:deliveryId/attempts', {
      config: { scopes: ['webhooks:read'] },
      schema: {
        tags,
        summary: 'Attempt log of a delivery',
        params: DeliveryParams,
        response: { 200: AttemptList, ...errorResponses(404) },
        'x-extension': true,
      },
    }, async (request) => webhooks.listAttempts(principalOf(request), request.params.subscriptionId, request.params.deliveryId));

    app.post('/webhooks/:subscriptionId/deliveries/:deliveryId/retry', {
      config: { scopes: ['webhooks:write'] },
      schema: {
        tags,
        summary: 'Start a new cycle of attempts for a failed delivery (same eventId)',
        params: DeliveryParams,
        response: { 200: DeliveryEnvelope, ...errorResponses(404, 409) },
      },
    }, async (request) => webhooks.retryDelivery(principalOf(request), request.params.subscriptionId, request.params.deliveryId));
  };
}
