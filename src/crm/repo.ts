import type { Queryable } from '../db/driver.js';
import { equalIfGiven, olderThan } from '../db/sql.js';

export type FollowUpStatus = 'pending' | 'scheduled' | 'sending' | 'sent' | 'dismissed' | 'canceled' | 'expired' | 'failed';

export interface LeadRow {
  id: string;
  tenant_id: string;
  name: string;
  phone_e164: string | null;
  conversation_id: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface OpportunityRow {
  id: string;
  tenant_id: string;
  lead_id: string;
  conversation_id: string | null;
  stage: string;
  status: string;
  revision: number;
  created_at: Date;
  updated_at: Date;
  /** The opportunity as the API writes it (generated: src/crm/sql/opportunity_document.sql). */
  document: string;
}

export interface FollowUpRow {
  id: string;
  tenant_id: string;
  lead_id: string;
  opportunity_id: string | null;
  conversation_id: string;
  channel_kind: string;
  status: FollowUpStatus;
  mode: 'draft' | 'auto';
  reason_code: string;
  reason_text: string | null;
  message_draft: string | null;
  draft_status: 'empty' | 'generated' | 'edited';
  due_at: Date | null;
  expires_at: Date;
  claim_state: 'active' | 'completed' | null;
  claimed_at: Date | null;
  sent_at: Date | null;
  reply_id: string | null;
  request_event_id: string | null;
  feedback_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface SettingsRow {
  follow_up_mode: 'off' | 'draft' | 'auto';
  follow_up_level: 'light' | 'balanced' | 'proactive';
  follow_up_instructions: string | null;
  quiet_start: string | null;
  quiet_end: string | null;
}

export interface FollowUpFilter {
  status?: string;
  mode?: string;
  leadId?: string;
  conversationId?: string;
  dueAfter?: string;
}

export const crmRepo = {
  async insertLead(db: Queryable, row: { id: string; tenantId: string; name: string; phone: string | null; conversationId: string | null; now: Date }): Promise<LeadRow> {
    const rows = await db.query<LeadRow>(
      'INSERT INTO leads (id, tenant_id, name, phone_e164, conversation_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING *',
      [row.id, row.tenantId, row.name, row.phone, row.conversationId, row.now],
    );
    return rows[0];
  },

  async getLead(db: Queryable, tenantId: string, leadId: string): Promise<LeadRow | undefined> {
    return (await db.query<LeadRow>('SELECT * FROM leads WHERE tenant_id = $1 AND id = $2', [tenantId, leadId]))[0];
  },

  async insertOpportunity(
    db: Queryable,
    row: { id: string; tenantId: string; leadId: string; conversationId: string | null; stage: string; status: string; now: Date },
  ): Promise<OpportunityRow> {
    const rows = await db.query<OpportunityRow>(
      `INSERT INTO opportunities (id, tenant_id, lead_id, conversation_id, stage, status, revision, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7) RETURNING *`,
      [row.id, row.tenantId, row.leadId, row.conversationId, row.stage, row.status, row.now],
    );
    return rows[0];
  },

  /** Applies the given fields and bumps the revision; with no fields only the revision moves (a touch). */
  async updateOpportunity(db: Queryable, tenantId: string, id: string, patch: { stage?: string; status?: string; followUpAt?: Date }, now: Date): Promise<OpportunityRow | undefined> {
    const rows = await db.query<OpportunityRow>(
      `UPDATE opportunities SET stage = COALESCE($3, stage), status = COALESCE($4, status), last_follow_up_at = COALESCE($5, last_follow_up_at),
         revision = revision + 1, updated_at = $6
       WHERE tenant_id = $1 AND id = $2 RETURNING *`,
      [tenantId, id, patch.stage ?? null, patch.status ?? null, patch.followUpAt ?? null, now],
    );
    return rows[0];
  },

  async latestOpportunity(db: Queryable, tenantId: string, leadId: string): Promise<OpportunityRow | undefined> {
    return (await db.query<OpportunityRow>('SELECT * FROM opportunities WHERE tenant_id = $1 AND lead_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1', [tenantId, leadId]))[0];
  },

  async insertFollowUp(db: Queryable, row: Omit<FollowUpRow, 'claim_state' | 'claimed_at' | 'sent_at' | 'reply_id' | 'request_event_id' | 'feedback_reason' | 'updated_at'>): Promise<FollowUpRow> {
    const rows = await db.query<FollowUpRow>(
      `INSERT INTO follow_ups (id, tenant_id, lead_id, opportunity_id, conversation_id, channel_kind, status, mode, reason_code, reason_text,
         message_draft, draft_status, due_at, expires_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15) RETURNING *`,
      [row.id, row.tenant_id, row.lead_id, row.opportunity_id, row.conversation_id, row.channel_kind, row.status, row.mode, row.reason_code, row.reason_text, row.message_draft, row.draft_status, row.due_at, row.expires_at, row.created_at],
    );
    return rows[0];
  },

  async getFollowUp(db: Queryable, tenantId: string, id: string, lock = false): Promise<FollowUpRow | undefined> {
    return (await db.query<FollowUpRow>(`SELECT * FROM follow_ups WHERE tenant_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`, [tenantId, id]))[0];
  },

  async listFollowUps(db: Queryable, tenantId: string, filter: FollowUpFilter, page: { limit: number; after?: { at: string; id: string } }): Promise<FollowUpRow[]> {
    const params: unknown[] = [tenantId];
    let where = equalIfGiven(params, { status: filter.status, mode: filter.mode, lead_id: filter.leadId, conversation_id: filter.conversationId });
    if (filter.dueAfter !== undefined) {
      params.push(filter.dueAfter);
      where += ` AND due_at > $${params.length}`;
    }
    if (page.after) where += ` AND ${olderThan(params, 'created_at', 'id', page.after)}`;
    params.push(page.limit);
    return db.query<FollowUpRow>(`SELECT * FROM follow_ups WHERE tenant_id = $1${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params);
  },

  async updateFollowUp(
    db: Queryable,
    tenantId: string,
    id: string,
    patch: Partial<Pick<FollowUpRow, 'status' | 'message_draft' | 'draft_status' | 'due_at' | 'claim_state' | 'claimed_at' | 'sent_at' | 'reply_id' | 'request_event_id' | 'feedback_reason'>>,
    now: Date,
  ): Promise<FollowUpRow> {
    const columns = Object.keys(patch) as Array<keyof typeof patch>;
    const sets = columns.map((column, i) => `${column} = $${i + 3}`);
    const rows = await db.query<FollowUpRow>(
      `UPDATE follow_ups SET ${[...sets, `updated_at = $${columns.length + 3}`].join(', ')} WHERE tenant_id = $1 AND id = $2 RETURNING *`,
      [tenantId, id, ...columns.map((column) => patch[column]), now],
    );
    return rows[0];
  },

  async settings(db: Queryable, tenantId: string): Promise<SettingsRow> {
    const rows = await db.query<SettingsRow>('SELECT * FROM crm_settings WHERE tenant_id = $1', [tenantId]);
    return rows[0] ?? { follow_up_mode: 'off', follow_up_level: 'balanced', follow_up_instructions: null, quiet_start: null, quiet_end: null };
  },

  async saveSettings(db: Queryable, tenantId: string, row: SettingsRow, now: Date): Promise<void> {
    await db.query(
      `INSERT INTO crm_settings (tenant_id, follow_up_mode, follow_up_level, follow_up_instructions, quiet_start, quiet_end, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (tenant_id) DO UPDATE SET follow_up_mode = EXCLUDED.follow_up_mode, follow_up_level = EXCLUDED.follow_up_level,
         follow_up_instructions = EXCLUDED.follow_up_instructions, quiet_start = EXCLUDED.quiet_start, quiet_end = EXCLUDED.quiet_end, updated_at = EXCLUDED.updated_at`,
      [tenantId, row.follow_up_mode, row.follow_up_level, row.follow_up_instructions, row.quiet_start, row.quiet_end, now],
    );
  },

  /** Tenants whose automation is on (draft or auto). */
  async automatedTenants(db: Queryable): Promise<Array<{ tenant_id: string }>> {
    return db.query<{ tenant_id: string }>(`SELECT tenant_id FROM crm_settings WHERE follow_up_mode <> 'off'`);
  },

  /** System sweep across tenants: open, unclaimed follow-ups past expires_at become expired. */
  async expireAll(db: Queryable, now: Date): Promise<number> {
    const rows = await db.query(
      `UPDATE follow_ups SET status = 'expired', updated_at = $1 WHERE status IN ('pending', 'scheduled') AND claim_state IS NULL AND expires_at <= $1 RETURNING id`,
      [now],
    );
    return rows.length;
  },

  async dueFollowUps(db: Queryable, tenantId: string, now: Date, limit: number): Promise<FollowUpRow[]> {
    return db.query<FollowUpRow>(
      `SELECT * FROM follow_ups WHERE tenant_id = $1 AND status IN ('pending', 'scheduled') AND claim_state IS NULL
         AND due_at <= $2 AND expires_at > $2 ORDER BY due_at, id LIMIT $3`,
      [tenantId, now, limit],
    );
  },

  /** System sweep across tenants: sends that were accepted but whose CRM completion did not commit. */
  async unfinishedSendsAll(db: Queryable): Promise<FollowUpRow[]> {
    return db.query<FollowUpRow>(`SELECT * FROM follow_ups WHERE status = 'sending' AND claim_state = 'completed' ORDER BY updated_at LIMIT 500`);
  },
};
