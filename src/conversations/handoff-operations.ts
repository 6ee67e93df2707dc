import { Type } from 'typebox';
import { DateTime, StringEnum } from '../http/schemas.js';
import { defineOperation } from '../operations/define.js';
import type { HandoffService } from './handoffs.js';
import { ConversationParams, ResolveReviewBody } from './schema.js';

/** What the handoff operations call. */
export interface HandoffOperationServices {
  handoffs: HandoffService;
}

const HandoffEnvelope = Type.Object(
  {
    handoff: Type.Object(
      {
        caseId: Type.String(),
        status: StringEnum(['open', 'resolved']),
        assignedOperatorId: Type.Optional(Type.String()),
        assignedOperatorName: Type.Optional(Type.String()),
        openedAt: DateTime,
        resolvedAt: Type.Optional(DateTime),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const common = { area: 'conversations', tag: 'Conversations', extension: true } as const;
const handoff = { caseId: 'hof_5t6y7u8i9o0p1a2s3d4f', status: 'open' as const, assignedOperatorId: '65f1c2a9b8e7d6c5b4a39281', assignedOperatorName: 'Lucía Pérez', openedAt: '2026-11-24T10:00:00.000Z' };

export const handoffOperations = [
  defineOperation({
    ...common,
    operationId: 'getHandoff',
    sdk: 'conversations.handoff.get',
    method: 'GET',
    path: '/conversations/{conversationId}/handoff',
    summary: "A conversation's latest human handoff",
    description: 'The latest handoff of the conversation to a human operator, open or resolved; 404 when the conversation never had one. openHandoff on the conversation says only whether one is open.',
    scopes: ['conversations:read'],
    params: ConversationParams,
    status: 200,
    response: HandoffEnvelope,
    errors: [404],
    examples: { response: { handoff } },
    handler: (s: HandoffOperationServices, ctx, input) => s.handoffs.get(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'resolveHandoff',
    sdk: 'conversations.handoff.resolve',
    method: 'POST',
    path: '/conversations/{conversationId}/handoff/resolve',
    summary: 'Resolve the open human handoff',
    description:
      'Resolves the conversation’s open handoff (the human is done), optionally with a note, and emits conversation.handoff.updated (action resolved). 409 when none is open. Reviews, unread and needs-reply are left as they are.',
    scopes: ['conversations:handoffs:write'],
    params: ConversationParams,
    body: ResolveReviewBody,
    status: 200,
    response: HandoffEnvelope,
    errors: [404, 409],
    examples: { request: { resolutionNote: 'Late check-out arranged by phone' }, response: { handoff: { ...handoff, status: 'resolved', resolvedAt: '2026-11-24T11:00:00.000Z' } } },
    handler: (s: HandoffOperationServices, ctx, input) => s.handoffs.resolve(ctx, input),
  }),
];
