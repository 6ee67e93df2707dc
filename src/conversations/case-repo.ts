import type { Queryable } from '../db/driver.js';
import type { REVIEW_REASONS } from './constants.js';

export interface ReviewRow {
  id: string;
  tenant_id: string;
  conversation_id: string;
  status: 'requested' | 'resolved';
  reason_code: (typeof REVIEW_REASONS)[number];
  note: string | null;
  requested_by_id: string;
  requested_by_name: string;
  assigned_operator_id: string | null;
  assigned_operator_name: string | null;
  requested_at: Date;
  resolved_at: Date | null;
  resolution_note: string | null;
}

export interface HandoffRow {
  id: string;
  conversation_id: string;
  status: 'open' | 'resolved';
  assigned_operator_id: string | null;
  opened_at: Date;
  resolved_at: Date | null;
  updated_at: Date;
  resolution_note: string | null;
}

/** A handoff with its assignee's name, as the public handoff read answers it. */
export interface HandoffWithOperator extends HandoffRow {
  assigned_operator_name: string | null;
}

/** A conversation's cases: the review (a human looks at it) and the handoff (a human takes it over). */
export const caseRepo = {
  async insertReview(
    db: Queryable,
    row: { id: string; tenantId: string; conversationId: string; reasonCode: string; note: string | null; requestedById: string; requestedByName: string; assignedOperatorId: string | null; now: Date },
  ): Promise<void> {
    await db.query(
      `INSERT INTO review_cases (id, tenant_id, conversation_id, status, reason_code, note, requested_by_id, requested_by_name, assigned_operator_id, requested_at)
       VALUES ($1, $2, $3, 'requested', $4, $5, $6, $7, $8, $9)`,
      [row.id, row.tenantId, row.conversationId, row.reasonCode, row.note, row.requestedById, row.requestedByName, row.assignedOperatorId, row.now],
    );
  },

  async getReview(db: Queryable, tenantId: string, reviewId: string): Promise<ReviewRow | undefined> {
    const rows = await db.query<ReviewRow>(
      `SELECT r.*, o.display_name AS assigned_operator_name FROM review_cases r
       LEFT JOIN operators o ON o.id = r.assigned_operator_id WHERE r.tenant_id = $1 AND r.id = $2`,
      [tenantId, reviewId],
    );
    return rows[0];
  },

  async assignReview(db: Queryable, tenantId: string, reviewId: string, operatorId: string | null): Promise<void> {
    await db.query('UPDATE review_cases SET assigned_operator_id = $2 WHERE id = $1 AND tenant_id = $3', [reviewId, operatorId, tenantId]);
  },

  async resolveReview(db: Queryable, tenantId: string, reviewId: string, note: string | null, now: Date): Promise<void> {
    await db.query(`UPDATE review_cases SET status = 'resolved', resolved_at = $3, resolution_note = $2 WHERE id = $1 AND tenant_id = $4`, [reviewId, note, now, tenantId]);
  },

  async insertHandoff(db: Queryable, row: { id: string; tenantId: string; conversationId: string; operatorId: string | null; now: Date }): Promise<HandoffRow> {
    const rows = await db.query<HandoffRow>(
      `INSERT INTO handoffs (id, tenant_id, conversation_id, status, assigned_operator_id, opened_at, updated_at)
       VALUES ($1, $2, $3, 'open', $4, $5, $5) RETURNING *`,
      [row.id, row.tenantId, row.conversationId, row.operatorId, row.now],
    );
    return rows[0];
  },

  async updateHandoff(
    db: Queryable,
    tenantId: string,
    handoffId: string,
    patch: { operatorId?: string | null; resolve?: boolean; resolutionNote?: string },
    now: Date,
  ): Promise<HandoffRow> {
    const rows = await db.query<HandoffRow>(
      `UPDATE handoffs SET
         assigned_operator_id = CASE WHEN $2 THEN $3 ELSE assigned_operator_id END,
         status = CASE WHEN $4 THEN 'resolved' ELSE status END,
         resolved_at = CASE WHEN $4 THEN $5::timestamptz ELSE resolved_at END,
         resolution_note = CASE WHEN $4 THEN $7 ELSE resolution_note END, updated_at = $5
       WHERE id = $1 AND tenant_id = $6 RETURNING *`,
      [handoffId, patch.operatorId !== undefined, patch.operatorId ?? null, patch.resolve === true, now, tenantId, patch.resolutionNote ?? null],
    );
    return rows[0];
  },

  async getHandoff(db: Queryable, tenantId: string, handoffId: string): Promise<HandoffRow | undefined> {
    return (await db.query<HandoffRow>('SELECT * FROM handoffs WHERE id = $1 AND tenant_id = $2', [handoffId, tenantId]))[0];
  },

  /** The conversation's latest handoff, open or resolved, with the assignee's name. */
  async latestHandoff(db: Queryable, tenantId: string, conversationId: string): Promise<HandoffWithOperator | undefined> {
    const rows = await db.query<HandoffWithOperator>(
      `SELECT h.*, o.display_name AS assigned_operator_name FROM handoffs h
       LEFT JOIN operators o ON o.id = h.assigned_operator_id
       WHERE h.conversation_id = $1 AND h.tenant_id = $2 ORDER BY h.opened_at DESC, h.id DESC LIMIT 1`,
      [conversationId, tenantId],
    );
    return rows[0];
  },
};
