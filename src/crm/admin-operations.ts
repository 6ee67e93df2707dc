import { Type } from 'typebox';
import { defineOperation } from '../operations/define.js';
import { DateTime, Strict } from '../http/schemas.js';
import type { CrmService } from './service.js';

/** What the CRM's admin operations call. */
export interface CrmAdminServices {
  crm: CrmService;
}

const Id = Type.String({ minLength: 1, maxLength: 200 });
const Text = Type.String({ minLength: 1, maxLength: 160 });
const closed = { additionalProperties: false } as const;
const TenantParams = Type.Object({ tenantId: Id }, Strict);

const Lead = Type.Object(
  { leadId: Type.String(), name: Type.String(), phone: Type.Optional(Type.String({ description: 'E.164' })), conversationId: Type.Optional(Type.String()) },
  closed,
);
const Opportunity = Type.Object(
  {
    opportunityId: Type.String(),
    leadId: Type.String(),
    conversationId: Type.Optional(Type.String()),
    stage: Type.String(),
    status: Type.String(),
    revision: Type.Integer(),
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  closed,
);

/** Leads and opportunities, as the sales CRM writes them. */
export const crmAdminOperations = [
  defineOperation({
    surface: 'admin',
    operationId: 'createLead',
    method: 'POST',
    path: '/tenants/{tenantId}/leads',
    summary: 'Create a lead, optionally linked to a conversation',
    params: TenantParams,
    body: Type.Object({ name: Text, phone: Type.Optional(Type.String({ minLength: 3, maxLength: 32 })), conversationId: Type.Optional(Id) }, Strict),
    status: 201,
    response: Lead,
    errors: [404],
    handler: (services: CrmAdminServices, ctx, input) => services.crm.createLead(ctx.tenantId, input),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'createOpportunity',
    method: 'POST',
    path: '/tenants/{tenantId}/opportunities',
    summary: 'Create an opportunity for a lead (crm.opportunity.created)',
    params: TenantParams,
    body: Type.Object({ leadId: Id, stage: Text, status: Text, conversationId: Type.Optional(Id) }, Strict),
    status: 201,
    response: Opportunity,
    errors: [404],
    handler: (services: CrmAdminServices, ctx, input) => services.crm.createOpportunity(ctx.tenantId, input),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'updateOpportunity',
    method: 'PATCH',
    path: '/tenants/{tenantId}/opportunities/{opportunityId}',
    summary: "Change an opportunity's stage or status; the revision increases (crm.opportunity.updated)",
    params: Type.Object({ tenantId: Id, opportunityId: Id }, Strict),
    body: Type.Object({ stage: Type.Optional(Text), status: Type.Optional(Text) }, { ...Strict, minProperties: 1 }),
    status: 200,
    response: Opportunity,
    errors: [404],
    handler: (services: CrmAdminServices, ctx, { opportunityId, ...patch }) => services.crm.updateOpportunity(ctx.tenantId, opportunityId, patch),
  }),
];
