import { defineOperation } from '../operations/define.js';
import { LeadEnvelope, LeadList, LeadParams, ListLeadsQuery, ListOpportunitiesQuery, OpportunityEnvelope, OpportunityList, OpportunityParams } from './schema.js';
import type { SalesService } from './sales.js';

/** What the sales reads call. */
export interface SalesOperationServices {
  sales: SalesService;
}

const common = { area: 'crm', tag: 'CRM', extension: true } as const;
const at = '2026-11-24T10:00:00.000Z';
const lead = { leadId: 'lead_8w7e6r5t4y3u2i1o0p9a', name: 'Ana Martínez', phone: '+525512345678', conversationId: 'cnv_7h2k9m4p1q8r3s6t0v5w', createdAt: at, updatedAt: at };
const opportunity = { opportunityId: 'opp_1q2w3e4r5t6y7u8i9o0p', leadId: lead.leadId, conversationId: lead.conversationId, stage: 'quote', status: 'open', revision: 2, createdAt: at, updatedAt: at };

export const salesOperations = [
  defineOperation({
    ...common,
    operationId: 'listLeads',
    sdk: 'crm.leads.list',
    method: 'GET',
    path: '/crm/leads',
    summary: 'List sales leads, newest first',
    description: 'Sales leads newest first, filtered by conversation or phone (E.164). A lead’s leadId and conversationId are what createFollowUp needs. Page with limit and nextCursor while hasMore is true.',
    scopes: ['crm:sales:read'],
    query: ListLeadsQuery,
    status: 200,
    response: LeadList,
    examples: { response: { leads: [lead], hasMore: false } },
    handler: (s: SalesOperationServices, ctx, input) => s.sales.listLeads(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'getLead',
    sdk: 'crm.leads.get',
    method: 'GET',
    path: '/crm/leads/{leadId}',
    summary: 'Read a sales lead',
    description: 'One sales lead by id, with its phone and the conversation it came from (what createFollowUp needs).',
    scopes: ['crm:sales:read'],
    params: LeadParams,
    status: 200,
    response: LeadEnvelope,
    errors: [404],
    examples: { response: { lead } },
    handler: (s: SalesOperationServices, ctx, input) => s.sales.getLead(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'listOpportunities',
    sdk: 'crm.opportunities.list',
    method: 'GET',
    path: '/crm/opportunities',
    summary: 'List sales opportunities, newest first',
    description:
      'Sales opportunities newest first, filtered by lead, conversation, stage or status; the same records the crm.opportunity.* events name. Page with limit and nextCursor while hasMore is true.',
    scopes: ['crm:sales:read'],
    query: ListOpportunitiesQuery,
    status: 200,
    response: OpportunityList,
    examples: { response: { opportunities: [opportunity], hasMore: false } },
    handler: (s: SalesOperationServices, ctx, input) => s.sales.listOpportunities(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'getOpportunity',
    sdk: 'crm.opportunities.get',
    method: 'GET',
    path: '/crm/opportunities/{opportunityId}',
    summary: 'Read a sales opportunity',
    description: 'One sales opportunity by id, with its stage, status and revision.',
    scopes: ['crm:sales:read'],
    params: OpportunityParams,
    status: 200,
    response: OpportunityEnvelope,
    errors: [404],
    examples: { response: { opportunity } },
    handler: (s: SalesOperationServices, ctx, input) => s.sales.getOpportunity(ctx, input),
  }),
];
