import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import type { Services } from '../services.js';
import { keyActor } from './actor.js';
import {
  AssignReviewBody,
  ConversationList,
  ConversationParams,
  ListConversationsQuery,
  MarkReadResult,
  NeedsReplyResult,
  OpenReviewBody,
  OperatorList,
  ResolveReviewBody,
} from './schema.js';

const tags = ['Conversations'];
const review = { $ref: 'ReviewCase#' } as const;

/** Public conversation controls: thin routes over ConversationService. */
export function conversationRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { conversations } = services;

    app.get('/conversations', {
      config: { scopes: ['conversations:read'] },
      schema: { tags, summary: 'Find conversations (newest activity first)', querystring: ListConversationsQuery, response: { 200: ConversationList, ...errorResponses(404) } },
    }, async (request) => conversations.list(principalOf(request).tenantId, request.query));

    app.get('/conversations/assignable-operators', {
      config: { scopes: ['conversations:assignment:read'] },
      schema: { tags, summary: 'Active operators usable as owner or assignee', response: { 200: OperatorList, ...errorResponses() } },
    }, async (request) => conversations.assignableOperators(principalOf(request).tenantId));

    app.post('/conversations/:conversationId/read', {
      config: { scopes: ['conversations:triage:write'] },
      schema: { tags, summary: 'Mark a conversation read', params: ConversationParams, response: { 200: MarkReadResult, ...errorResponses(404) } },
    }, async (request) => {
      const principal = principalOf(request);
      return conversations.markRead(principal.tenantId, request.params.conversationId, keyActor(principal));
    });

    app.post('/conversations/:conversationId/needs-reply/resolve', {
      config: { scopes: ['conversations:triage:write'] },
      schema: { tags, summary: 'Acknowledge the needs-reply obligation', params: ConversationParams, response: { 200: NeedsReplyResult, ...errorResponses(404) } },
    }, async (request) => {
      const principal = principalOf(request);
      return conversations.resolveNeedsReply(principal.tenantId, request.params.conversationId, keyActor(principal));
    });

    app.post('/conversations/:conversationId/review', {
      config: { scopes: ['conversations:reviews:write'] },
      schema: { tags, summary: 'Open a review case', params: ConversationParams, body: OpenReviewBody, response: { 200: review, ...errorResponses(404, 409) } },
    }, async (request) => {
      const principal = principalOf(request);
      return conversations.openReview(principal.tenantId, request.params.conversationId, keyActor(principal), request.body ?? {});
    });

    app.put('/conversations/:conversationId/review/assignment', {
      config: { scopes: ['conversations:reviews:write'] },
      schema: { tags, summary: 'Assign or unassign the open review', params: ConversationParams, body: AssignReviewBody, response: { 200: review, ...errorResponses(404, 409) } },
    }, async (request) => {
      const principal = principalOf(request);
      return conversations.assignReview(principal.tenantId, request.params.conversationId, keyActor(principal), request.body.operatorId);
    });

    app.post('/conversations/:conversationId/review/resolve', {
      config: { scopes: ['conversations:reviews:write'] },
      schema: { tags, summary: 'Resolve the open review', params: ConversationParams, body: ResolveReviewBody, response: { 200: review, ...errorResponses(404, 409) } },
    }, async (request) => {
      const principal = principalOf(request);
      return conversations.resolveReview(principal.tenantId, request.params.conversationId, keyActor(principal), request.body?.resolutionNote);
    });
  };
}
