import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { invalid, notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { JsonText } from '../platform/json-text.js';
import { normalizePhone } from '../conversations/phone.js';
import { iso } from '../util/time.js';
import { crmRepo, type LeadRow } from './repo.js';
import { salesRepo, type LeadFilter, type OpportunityFilter, type Position } from './sales-repo.js';
import type { ListLeadsQuery, ListOpportunitiesQuery, Opportunity, OpportunityEnvelope, OpportunityList } from './schema.js';

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
/** An opportunity's keyset position from its stored document: createdAt is the created_at iso() would print. */
function positionOfDocument(document: string): Position {
  const { createdAt, opportunityId } = new JsonText<Static<typeof Opportunity>>(document).value();
  return { at: createdAt, id: opportunityId };
}

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

  async listOpportunities({ tenantId }: Ctx, query: Static<typeof ListOpportunitiesQuery>): Promise<JsonText<Static<typeof OpportunityList>>> {
    const filter: OpportunityFilter = { leadId: query.leadId, conversationId: query.conversationId, stage: query.stage, status: query.status };
    const binding = { tenantId, ...filter };
    const after = query.cursor ? this.cursors.decode<Position>('opportunities', binding, query.cursor) : undefined;
    const limit = query.limit ?? DEFAULT_LIMIT;
    const documents = await salesRepo.opportunityDocuments(this.db, tenantId, filter, { limit: limit + 1, after });
    const { page, hasMore, next } = this.cursors.page('opportunities', binding, documents, limit, positionOfDocument);
    // The serializer's order: the required properties, then the optional nextCursor.
    const cursor = next.nextCursor === undefined ? '' : `,"nextCursor":${JSON.stringify(next.nextCursor)}`;
    return new JsonText(`{"opportunities":[${page.join(',')}],"hasMore":${hasMore}${cursor}}`);
  }

  async getOpportunity({ tenantId }: Ctx, { opportunityId }: { opportunityId: string }): Promise<JsonText<Static<typeof OpportunityEnvelope>>> {
    const document = await salesRepo.opportunityDocument(this.db, tenantId, opportunityId);
    if (document === undefined) throw notFound('opportunity');
    return new JsonText(`{"opportunity":${document}}`);
  }
}
