import { Type, type TSchema } from 'typebox';
import type { Principal } from '../auth/keys.js';
import { keyActor } from '../conversations/actor.js';
import { AssignReviewBody, ConversationParams, ListConversationsQuery, OpenReviewBody, ResolveReviewBody } from '../conversations/schema.js';
import { CloseBody, CreateFollowUpBody, FollowUpParams, ListFollowUpsQuery, PatchFollowUpBody, PatchSettingsBody, SendBody } from '../crm/schema.js';
import { Strict } from '../http/schemas.js';
import { RequestParams, StartBody, TemplateStatusQuery } from '../messaging/schema.js';
import type { Services } from '../services.js';
import { DeliveryListQuery, SubscriptionParams } from '../webhooks/schema.js';

/** One MCP tool: the same schema and service call as its REST route, and the same scopes. */
export interface ToolDefinition {
  name: string;
  description: string;
  scopes: string[];
  input: TSchema;
  run(services: Services, principal: Principal, input: Record<string, unknown>): Promise<unknown>;
}

/** Merges path parameters and a body into one flat tool input schema. */
function merge(...schemas: TSchema[]): TSchema {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const schema of schemas) {
    const s = schema as { properties?: Record<string, unknown>; required?: string[] };
    Object.assign(properties, s.properties ?? {});
    required.push(...(s.required ?? []));
  }
  return Type.Unsafe({ type: 'object', properties, required, additionalProperties: false });
}

const none = Type.Object({}, Strict);
const IdempotencyKey = Type.Object({ idempotencyKey: Type.String({ minLength: 1, maxLength: 255 }) }, Strict);

// Tool inputs are validated against these schemas before `run`, so the casts below only restate them.
type Arg<F extends (...args: never[]) => unknown, N extends number> = Parameters<F>[N];
type S = Services;

export const TOOLS: ToolDefinition[] = [
  {
    name: 'list_conversations',
    description: 'Find conversations, newest activity first, with inbox counts that follow the filters.',
    scopes: ['conversations:read'],
    input: ListConversationsQuery,
    run: (s, p, i) => s.conversations.list(p.tenantId, i as Arg<S['conversations']['list'], 1>),
  },
  {
    name: 'list_assignable_operators',
    description: 'Active operators usable as conversation owner or review assignee.',
    scopes: ['conversations:assignment:read'],
    input: none,
    run: (s, p) => s.conversations.assignableOperators(p.tenantId),
  },
  {
    name: 'mark_conversation_read',
    description: 'Zero the unread count of a conversation.',
    scopes: ['conversations:triage:write'],
    input: ConversationParams,
    run: (s, p, i) => s.conversations.markRead(p.tenantId, String(i.conversationId), keyActor(p)),
  },
  {
    name: 'resolve_needs_reply',
    description: 'Acknowledge the needs-reply obligation (does not close reviews or handoffs).',
    scopes: ['conversations:triage:write'],
    input: ConversationParams,
    run: (s, p, i) => s.conversations.resolveNeedsReply(p.tenantId, String(i.conversationId), keyActor(p)),
  },
  {
    name: 'open_review',
    description: 'Open a review case on a conversation (fails when a review or handoff is open).',
    scopes: ['conversations:reviews:write'],
    input: merge(ConversationParams, OpenReviewBody),
    run: (s, p, { conversationId, ...body }) => s.conversations.openReview(p.tenantId, String(conversationId), keyActor(p), body as Arg<S['conversations']['openReview'], 3>),
  },
  {
    name: 'assign_review',
    description: 'Assign the open review to an operator, or unassign with null.',
    scopes: ['conversations:reviews:write'],
    input: merge(ConversationParams, AssignReviewBody),
    run: (s, p, i) => s.conversations.assignReview(p.tenantId, String(i.conversationId), keyActor(p), (i.operatorId as string | null) ?? null),
  },
  {
    name: 'resolve_review',
    description: 'Resolve the open review (does not affect a handoff).',
    scopes: ['conversations:reviews:write'],
    input: merge(ConversationParams, ResolveReviewBody),
    run: (s, p, i) => s.conversations.resolveReview(p.tenantId, String(i.conversationId), keyActor(p), i.resolutionNote as string | undefined),
  },
  {
    name: 'whatsapp_template_status',
    description: 'Persisted readiness of the WhatsApp conversation-start template per locale (read-only).',
    scopes: ['conversations:read'],
    input: TemplateStatusQuery,
    run: (s, p, i) => s.messaging.templateStatus(p.tenantId, String(i.channelId)),
  },
  {
    name: 'start_conversation',
    description: 'Start a WhatsApp conversation with a template message. Queued, not delivered; reuse the idempotencyKey when retrying.',
    scopes: ['conversations:write'],
    input: merge(StartBody, IdempotencyKey),
    run: async (s, p, { idempotencyKey, ...body }) => (await s.messaging.start(p, String(idempotencyKey), body as unknown as Arg<S['messaging']['start'], 2>)).body,
  },
  {
    name: 'message_request_status',
    description: 'Status of a queued send, by requestEventId.',
    scopes: ['messages:read'],
    input: RequestParams,
    run: (s, p, i) => s.messaging.requestStatus(p.tenantId, String(i.requestEventId)),
  },
  {
    name: 'list_follow_ups',
    description: 'List CRM follow-ups, newest first.',
    scopes: ['crm:followups:read'],
    input: ListFollowUpsQuery,
    run: (s, p, i) => s.crm.listFollowUps(p.tenantId, i as Arg<S['crm']['listFollowUps'], 1>),
  },
  {
    name: 'get_follow_up',
    description: 'Read one follow-up.',
    scopes: ['crm:followups:read'],
    input: FollowUpParams,
    run: (s, p, i) => s.crm.getFollowUp(p.tenantId, String(i.followUpId)),
  },
  {
    name: 'create_follow_up',
    description: 'Create a follow-up from a lead and its conversation.',
    scopes: ['crm:followups:write'],
    input: CreateFollowUpBody,
    run: (s, p, i) => s.crm.createFollowUp(p.tenantId, i as Arg<S['crm']['createFollowUp'], 1>),
  },
  {
    name: 'update_follow_up',
    description: 'Edit the message draft or due time of an open follow-up.',
    scopes: ['crm:followups:write'],
    input: merge(FollowUpParams, PatchFollowUpBody),
    run: (s, p, { followUpId, ...patch }) => s.crm.updateFollowUp(p.tenantId, String(followUpId), patch as Arg<S['crm']['updateFollowUp'], 2>),
  },
  {
    name: 'dismiss_follow_up',
    description: 'Dismiss an open follow-up, optionally with feedback.',
    scopes: ['crm:followups:write'],
    input: merge(FollowUpParams, CloseBody),
    run: (s, p, i) => s.crm.close(p.tenantId, String(i.followUpId), 'dismissed', i.feedbackReason as string | undefined),
  },
  {
    name: 'cancel_follow_up',
    description: 'Cancel an open follow-up, optionally with feedback.',
    scopes: ['crm:followups:write'],
    input: merge(FollowUpParams, CloseBody),
    run: (s, p, i) => s.crm.close(p.tenantId, String(i.followUpId), 'canceled', i.feedbackReason as string | undefined),
  },
  {
    name: 'send_follow_up',
    description: 'Send a follow-up once (a second send is refused). Queued, not delivered.',
    scopes: ['crm:followups:write'],
    input: merge(FollowUpParams, SendBody),
    run: async (s, p, i) => (await s.followUpSender.send(p.tenantId, String(i.followUpId), { messageText: i.messageText as string | undefined })).body,
  },
  {
    name: 'get_follow_up_settings',
    description: 'Read the follow-up automation settings before changing them.',
    scopes: ['crm:automation:read'],
    input: none,
    run: (s, p) => s.crm.settings(p.tenantId),
  },
  {
    name: 'update_follow_up_settings',
    description: 'Change follow-up automation. Only on explicit instruction from the business.',
    scopes: ['crm:automation:write'],
    input: PatchSettingsBody,
    run: (s, p, i) => s.crm.updateSettings(p.tenantId, i as Arg<S['crm']['updateSettings'], 1>),
  },
  {
    name: 'list_webhooks',
    description: 'List webhook subscriptions.',
    scopes: ['webhooks:read'],
    input: none,
    run: (s, p) => s.webhooks.list(p),
  },
  {
    name: 'list_webhook_deliveries',
    description: 'List deliveries of a webhook subscription, newest first.',
    scopes: ['webhooks:read'],
    input: merge(SubscriptionParams, DeliveryListQuery),
    run: (s, p, { subscriptionId, ...query }) => s.webhooks.listDeliveries(p, String(subscriptionId), query as Arg<S['webhooks']['listDeliveries'], 2>),
  },
];
