import type { Queryable } from '../db/driver.js';
import { equalIfGiven, olderThan } from '../db/sql.js';
import type { LeadRow } from './repo.js';

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
    const params: unknown[] = [tenantId];
    let where = equalIfGiven(params, { conversation_id: filter.conversationId, phone_e164: filter.phone });
    if (page.after) where += ` AND ${olderThan(params, 'created_at', 'id', page.after)}`;
    params.push(page.limit);
    return db.query<LeadRow>(`SELECT * FROM leads WHERE tenant_id = $1${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params);
  },

  /** Stored documents of opportunities newest first (what the response splices in as they are). */
  async opportunityDocuments(db: Queryable, tenantId: string, filter: OpportunityFilter, page: { limit: number; after?: Position }): Promise<string[]> {
    const params: unknown[] = [tenantId];
    let where = equalIfGiven(params, { lead_id: filter.leadId, conversation_id: filter.conversationId, stage: filter.stage, status: filter.status });
    if (page.after) where += ` AND ${olderThan(params, 'created_at', 'id', page.after)}`;
    params.push(page.limit);
    const rows = await db.query<{ document: string }>(`SELECT document FROM opportunities WHERE tenant_id = $1${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params);
    return rows.map((row) => row.document);
  },

  /** One opportunity's stored document. */
  async opportunityDocument(db: Queryable, tenantId: string, id: string): Promise<string | undefined> {
    return (await db.query<{ document: string }>('SELECT document FROM opportunities WHERE tenant_id = $1 AND id = $2', [tenantId, id]))[0]?.document;
  },
};
