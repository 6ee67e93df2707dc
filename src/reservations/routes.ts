import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ConversationParams } from '../conversations/schema.js';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import type { Services } from '../services.js';
import {
  ConversationReservations,
  IntegrationSettings,
  LifecycleSettingBody,
  LifecycleSettings,
  LifecycleSettingsParams,
  ListReservationsQuery,
  ReservationList,
} from './schema.js';

const tags = ['Reservations'];

/** Public reservation reads and lifecycle settings: thin routes over ReservationService. */
export function reservationRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { reservations } = services;

    app.get('/reservations', {
      config: { scopes: ['reservations:read'] },
      schema: {
        tags,
        summary: 'Mirrored provider reservations (20 per page; continue with nextCursor while hasNext)',
        querystring: ListReservationsQuery,
        response: { 200: ReservationList, ...errorResponses(404) },
      },
    }, async (request) => reservations.list(principalOf(request).tenantId, request.query));

    app.get('/conversations/:conversationId/reservations', {
      config: { scopes: ['reservations:read'] },
      schema: {
        tags,
        summary: 'Reservations whose guest phone matches the conversation contact (at most five)',
        params: ConversationParams,
        response: { 200: ConversationReservations, ...errorResponses(404) },
      },
    }, async (request) => reservations.forConversation(principalOf(request).tenantId, request.params.conversationId));

    app.get('/reservations/lifecycle-settings', {
      config: { scopes: ['reservations:read'] },
      schema: { tags, summary: 'Guest-messaging lifecycle settings, integrations and available senders', response: { 200: LifecycleSettings, ...errorResponses() } },
    }, async (request) => reservations.lifecycleSettings(principalOf(request).tenantId));

    app.put('/reservations/lifecycle-settings/:integrationId', {
      config: { scopes: ['reservations:write'] },
      schema: {
        tags,
        summary: 'Enable or disable one lifecycle event of one integration, or select its sender (future messaging only)',
        params: LifecycleSettingsParams,
        body: LifecycleSettingBody,
        response: { 200: IntegrationSettings, ...errorResponses(404) },
      },
    }, async (request) => reservations.updateLifecycleSetting(principalOf(request).tenantId, request.params.integrationId, request.body));
  };
}
