import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { invalid, notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { normalizePhone } from '../conversations/phone.js';
import { iso } from '../util/time.js';
import { crmRepo, type LeadRow } from './repo.js';
import { salesRepo, type LeadFilter, type OpportunityFilter, type Position } from './sales-repo.js';
import type { ListLeadsQuery, ListOpportunitiesQuery } from './schema.js';
import { opportunityView } from './views.js';

export function leadView(row: LeadRow) {
  return {
    leadId: row.id,
    name: row.name,
    phone: row.phone_e164 ?? undefined,
    conversationId: row.conversation_id ?? undefined,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

const DEFAULT_LIMIT = 50;
const position = (row: { created_at: Date; id: string }): Position => ({ at: iso(row.created_at)!, id: row.id });

/** Leads and opportunities as an integrator finds them: the leadId and conversationId a follow-up needs. */
export class SalesService {
  constructor(
    private readonly db: Db,
    private readonly cursors: Cursors,
  ) {}

  async listLeads({ tenantId }: Ctx, query: Static<typeof ListLeadsQuery>) {
    let phone: string | undefined;
    if (query.phone !== undefined) {
      phone = normalizePhone(query.phone);
      if (!phone) throw invalid('query.phone', 'must be a valid international phone number such as +525512345678');
    }
    const filter: LeadFilter = { conversationId: query.conversationId, phone };
    const binding = { tenantId, ...filter };
    const after = query.cursor ? this.cursors.decode<Position>('leads', binding, query.cursor) : undefined;
    const limit = query.limit ?? DEFAULT_LIMIT;
    const rows = await salesRepo.listLeads(this.db, tenantId, filter, { limit: limit + 1, after });
    const { page, hasMore, next } = this.cursors.page('leads', binding, rows, limit, position);
    return { leads: page.map(leadView), ...next, hasMore };
  }

  async getLead({ tenantId }: Ctx, { leadId }: { leadId: string }) {
    const row = await crmRepo.getLead(this.db, tenantId, leadId);
    if (!row) throw notFound('lead');
    return { lead: leadView(row) };
  }

  async listOpportunities({ tenantId }: Ctx, query: Static<typeof ListOpportunitiesQuery>) {
    const filter: OpportunityFilter = { leadId: query.leadId, conversationId: query.conversationId, stage: query.stage, status: query.status };
    const binding = { tenantId, ...filter };
    const after = query.cursor ? this.cursors.decode<Position>('opportunities', binding, query.cursor) : undefined;
    const limit = query.limit ?? DEFAULT_LIMIT;
    const rows = await salesRepo.listOpportunities(this.db, tenantId, filter, { limit: limit + 1, after });
    const { page, hasMore, next } = this.cursors.page('opportunities', binding, rows, limit, position);
    return { opportunities: page.map(opportunityView), ...next, hasMore };
  }

  async getOpportunity({ tenantId }: Ctx, { opportunityId }: { opportunityId: string }) {
    const row = await salesRepo.getOpportunity(this.db, tenantId, opportunityId);
    if (!row) throw notFound('opportunity');
    return { opportunity: opportunityView(row) };
  }
}
