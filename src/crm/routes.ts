import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import type { Services } from '../services.js';
import {
  CloseBody,
  CreateFollowUpBody,
  FollowUpEnvelope,
  FollowUpList,
  FollowUpParams,
  ListFollowUpsQuery,
  PatchFollowUpBody,
  PatchSettingsBody,
  SendAccepted,
  SendBody,
  SendHeaders,
  Settings,
} from './schema.js';

const tags = ['CRM'];

/** CRM follow-ups and automation settings: thin routes over CrmService and FollowUpSender. */
export function crmRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { crm, followUpSender } = services;
    const tenant = (request: Parameters<typeof principalOf>[0]) => principalOf(request).tenantId;

    app.get('/crm/follow-ups', {
      config: { scopes: ['crm:followups:read'] },
      schema: { tags, summary: 'List follow-ups, newest first', querystring: ListFollowUpsQuery, response: { 200: FollowUpList, ...errorResponses() } },
    }, async (request) => crm.listFollowUps(tenant(request), request.query));

    app.post('/crm/follow-ups', {
      config: { scopes: ['crm:followups:write'] },
      schema: { tags, summary: 'Create a follow-up from a lead and its conversation', body: CreateFollowUpBody, response: { 201: FollowUpEnvelope, ...errorResponses(404) } },
    }, async (request, reply) => reply.status(201).send(await crm.createFollowUp(tenant(request), request.body)));

    app.get('/crm/follow-ups/:followUpId', {
      config: { scopes: ['crm:followups:read'] },
      schema: { tags, summary: 'Read a follow-up', params: FollowUpParams, response: { 200: FollowUpEnvelope, ...errorResponses(404) } },
    }, async (request) => crm.getFollowUp(tenant(request), request.params.followUpId));

    app.patch('/crm/follow-ups/:followUpId', {
      config: { scopes: ['crm:followups:write'] },
      schema: { tags, summary: 'Edit the draft or due time', params: FollowUpParams, body: PatchFollowUpBody, response: { 200: FollowUpEnvelope, ...errorResponses(404, 409) } },
    }, async (request) => crm.updateFollowUp(tenant(request), request.params.followUpId, request.body));

    app.post('/crm/follow-ups/:followUpId/dismiss', {
      config: { scopes: ['crm:followups:write'] },
      schema: { tags, summary: 'Dismiss a follow-up', params: FollowUpParams, body: CloseBody, response: { 200: FollowUpEnvelope, ...errorResponses(404, 409) } },
    }, async (request) => crm.close(tenant(request), request.params.followUpId, 'dismissed', request.body.feedbackReason));

    app.post('/crm/follow-ups/:followUpId/cancel', {
      config: { scopes: ['crm:followups:write'] },
      schema: { tags, summary: 'Cancel a follow-up', params: FollowUpParams, body: CloseBody, response: { 200: FollowUpEnvelope, ...errorResponses(404, 409) } },
    }, async (request) => crm.close(tenant(request), request.params.followUpId, 'canceled', request.body.feedbackReason));

    app.post('/crm/follow-ups/:followUpId/send', {
      config: { scopes: ['crm:followups:write'] },
      schema: {
        tags,
        summary: 'Send a follow-up (queued, not delivered); a second send is 409',
        params: FollowUpParams,
        headers: SendHeaders,
        body: SendBody,
        response: { 202: SendAccepted, ...errorResponses(404, 409) },
      },
    }, async (request, reply) => {
      const result = await followUpSender.send(tenant(request), request.params.followUpId, {
        messageText: request.body.messageText,
        idempotencyKey: request.headers['idempotency-key'],
      });
      if (result.replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.status(202).send(result.body);
    });

    app.get('/crm/follow-up-settings', {
      config: { scopes: ['crm:automation:read'] },
      schema: { tags, summary: 'Follow-up automation settings', response: { 200: Settings, ...errorResponses() } },
    }, async (request) => crm.settings(tenant(request)));

    app.patch('/crm/follow-up-settings', {
      config: { scopes: ['crm:automation:write'] },
      schema: { tags, summary: 'Change follow-up automation (only on explicit instruction)', body: PatchSettingsBody, response: { 200: Settings, ...errorResponses() } },
    }, async (request) => crm.updateSettings(tenant(request), request.body));
  };
}
