import { Type } from 'typebox';
import { defineOperation } from '../operations/define.js';
import { Contact } from '../conversations/admin-operations.js';
import { Strict } from '../http/schemas.js';
import { ProviderStatusBody, RequestStatusRecord } from './schema.js';
import type { InboxService } from '../conversations/inbox.js';
import type { MessagingService } from './service.js';

/** What the messaging admin operations call. */
export interface MessagingAdminServices {
  inbox: InboxService;
  messaging: MessagingService;
}

const Id = Type.String({ minLength: 1, maxLength: 200 });

const CreateContactBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
    phone: Type.Optional(Type.String({ minLength: 3, maxLength: 32 })),
    handle: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
    consent: Type.Optional(Type.Boolean()),
    optedOut: Type.Optional(Type.Boolean()),
  },
  Strict,
);

/** The provider callback simulator and contact creation (consent is recorded by the business). */
export const messagingAdminOperations = [
  defineOperation({
    surface: 'admin',
    operationId: 'applyProviderStatus',
    method: 'POST',
    path: '/tenants/{tenantId}/message-requests/{requestEventId}/provider-status',
    summary: "Apply a provider's status callback to a message request (the sandbox provider's only way to move)",
    params: Type.Object({ tenantId: Id, requestEventId: Id }, Strict),
    body: ProviderStatusBody,
    status: 200,
    response: RequestStatusRecord,
    errors: [404],
    handler: (services: MessagingAdminServices, ctx, input) => services.messaging.applyProviderStatus(ctx.tenantId, input.requestEventId, input.status, input.error),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'createContact',
    method: 'POST',
    path: '/tenants/{tenantId}/contacts',
    summary: 'Create (or find, by phone or handle) a contact and record its consent and opt-out',
    params: Type.Object({ tenantId: Id }, Strict),
    body: CreateContactBody,
    status: 201,
    response: Contact,
    errors: [404],
    handler: (services: MessagingAdminServices, ctx, input) => services.inbox.createContact(ctx.tenantId, input),
  }),
];
