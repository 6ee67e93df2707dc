import type { Queryable } from '../db/driver.js';
import type { LeadRow, OpportunityRow } from './repo.js';

/** A keyset position: newest first by (created_at, id). */
export interface Position {
  at: string;
  id: string;
}

export interface LeadFilter {
  conversationId?: string;
  phone?: string;
}

export interface OpportunityFilter {
  leadId?: string;
  conversationId?: string;
  stage?: string;
  status?: string;
}

/** The sales reads of an integrator: leads and opportunities, newest first. */
export const salesRepo = {
  async listLeads(db: Queryable, tenantId: string, filter: LeadFilter, page: { limit: number; after?: Position }): Promise<LeadRow[]> {
    return db.query<LeadRow>(
      `SELECT * FROM leads WHERE tenant_id = $1
         AND ($2::text IS NULL OR conversation_id = $2) AND ($3::text IS NULL OR phone_e164 = $3)
         AND ($4::timestamptz IS NULL OR (created_at, id) < ($4::timestamptz, $5::text))
       ORDER BY created_at DESC, id DESC LIMIT $6`,
      [tenantId, filter.conversationId ?? null, filter.phone ?? null, page.after?.at ?? null, page.after?.id ?? null, page.limit],
    );
  },

  async listOpportunities(db: Queryable, tenantId: string, filter: OpportunityFilter, page: { limit: number; after?: Position }): Promise<OpportunityRow[]> {
    return db.query<OpportunityRow>(
      `SELECT * FROM opportunities WHERE tenant_id = $1
         AND ($2::text IS NULL OR lead_id = $2) AND ($3::text IS NULL OR conversation_id = $3)
         AND ($4::text IS NULL OR stage = $4) AND ($5::text IS NULL OR status = $5)
         AND ($6::timestamptz IS NULL OR (created_at, id) < ($6::timestamptz, $7::text))
       ORDER BY created_at DESC, id DESC LIMIT $8`,
      [tenantId, filter.leadId ?? null, filter.conversationId ?? null, filter.stage ?? null, filter.status ?? null, page.after?.at ?? null, page.after?.id ?? null, page.limit],
    );
  },

  async getOpportunity(db: Queryable, tenantId: string, id: string): Promise<OpportunityRow | undefined> {
    return (await db.query<OpportunityRow>('SELECT * FROM opportunities WHERE tenant_id = $1 AND id = $2', [tenantId, id]))[0];
  },
};
