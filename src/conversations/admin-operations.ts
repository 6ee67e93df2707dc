import { Type } from 'typebox';
import { defineOperation } from '../operations/define.js';
import { DateTime, nullable, Ref, Strict, StringEnum } from '../http/schemas.js';
import { ConversationItem } from './schema.js';
import type { InboxService } from './inbox.js';

/** What the inbox's admin operations call. */
export interface InboxAdminServices {
  inbox: InboxService;
}

const Id = Type.String({ minLength: 1, maxLength: 200 });
const OperatorRef = Type.String({ minLength: 1, maxLength: 120 });
const closed = { additionalProperties: false } as const;
const TenantParams = Type.Object({ tenantId: Id }, Strict);
const ConversationParams = Type.Object({ tenantId: Id, conversationId: Id }, Strict);

/** The body of admin `POST /tenants/{tenantId}/inbound-messages`. */
const InboundMessageBody = Type.Object(
  {
    channelId: Type.String({ minLength: 1, maxLength: 120 }),
    contact: Type.Object(
      {
        name: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
        phone: Type.Optional(Type.String({ minLength: 3, maxLength: 32 })),
        handle: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
      },
      Strict,
    ),
    text: Type.String({ minLength: 1, maxLength: 4096 }),
    receivedAt: Type.Optional(Type.String({ format: 'date-time', description: 'Imports earlier history; not in the future' })),
  },
  Strict,
);

const Inbound = Type.Object({ conversationId: Type.String(), messageId: Type.String(), contactId: Type.String() }, closed);

/** A contact as the admin API returns it. */
export const Contact = Type.Object(
  {
    contactId: Type.String(),
    name: Type.Optional(Type.String()),
    phone: Type.Optional(Type.String({ description: 'E.164' })),
    handle: Type.Optional(Type.String()),
    consent: Type.Boolean(),
    optedOut: Type.Boolean(),
  },
  closed,
);

const ContactPatchBody = Type.Object(
  { name: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 160 }))), consent: Type.Optional(Type.Boolean()), optedOut: Type.Optional(Type.Boolean()) },
  { ...Strict, minProperties: 1 },
);

const HandoffBody = Type.Object({ action: StringEnum(['open', 'assign', 'resolve']), operatorId: Type.Optional(nullable(OperatorRef)) }, Strict);
const Handoff = Type.Object(
  {
    handoffId: Type.String(),
    conversationId: Type.String(),
    status: Type.String(),
    assignedOperatorId: nullable(Type.String()),
    openedAt: DateTime,
    resolvedAt: Type.Optional(DateTime),
    updatedAt: DateTime,
  },
  closed,
);

/** What feeds the inbox: inbound messages, contacts, ownership and handoffs (the stream is a plain route). */
export const conversationAdminOperations = [
  defineOperation({
    surface: 'admin',
    operationId: 'receiveInboundMessage',
    method: 'POST',
    path: '/tenants/{tenantId}/inbound-messages',
    summary: "A guest's message arrives: contact and conversation found or created, message.created emitted",
    params: TenantParams,
    body: InboundMessageBody,
    status: 201,
    response: Inbound,
    errors: [404],
    handler: (services: InboxAdminServices, ctx, input) => services.inbox.receiveInbound(ctx.tenantId, input),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'updateContact',
    method: 'PATCH',
    path: '/tenants/{tenantId}/contacts/{contactId}',
    summary: "Change a contact's name, consent or opt-out",
    params: Type.Object({ tenantId: Id, contactId: Id }, Strict),
    body: ContactPatchBody,
    status: 200,
    response: Contact,
    errors: [404],
    handler: (services: InboxAdminServices, ctx, { contactId, ...patch }) => services.inbox.updateContact(ctx.tenantId, contactId, patch),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'setConversationOwner',
    method: 'PATCH',
    path: '/tenants/{tenantId}/conversations/{conversationId}',
    summary: "Set or clear a conversation's owning operator",
    params: ConversationParams,
    body: Type.Object({ ownerOperatorId: nullable(OperatorRef) }, Strict),
    status: 200,
    response: Ref(ConversationItem),
    errors: [404],
    handler: (services: InboxAdminServices, ctx, input) => services.inbox.setOwner(ctx.tenantId, input.conversationId, input.ownerOperatorId, ctx.actor),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'updateHandoff',
    method: 'POST',
    path: '/tenants/{tenantId}/conversations/{conversationId}/handoff',
    summary: 'Open, assign or resolve the human handoff (conversation.handoff.updated)',
    params: ConversationParams,
    body: HandoffBody,
    status: 200,
    response: Handoff,
    errors: [404, 409],
    handler: (services: InboxAdminServices, ctx, { conversationId, ...input }) => services.inbox.handoff(ctx.tenantId, conversationId, input, ctx.actor),
  }),
];
