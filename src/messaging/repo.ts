import type { Queryable } from '../db/driver.js';

export type RequestStatus = 'queued' | 'sent' | 'delivered' | 'read' | 'failed';

export interface MessageRequestRow {
  id: string;
  tenant_id: string;
  conversation_id: string;
  reply_id: string;
  channel_id: string;
  channel_kind: string;
  recipient_phone: string | null;
  template_name: string | null;
  locale: string | null;
  text: string;
  status: RequestStatus;
  provider: string;
  provider_message_id: string | null;
  dispatching_at: Date | null;
  dispatch_attempts: number;
  unknown_outcomes: number;
  error_code: string | null;
  error_message: string | null;
  reconciled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const messageRequestRepo = {
  async get(db: Queryable, tenantId: string, id: string, lock = false): Promise<MessageRequestRow | undefined> {
    return (await db.query<MessageRequestRow>(`SELECT * FROM message_requests WHERE tenant_id = $1 AND id = $2${lock ? ' FOR NO KEY UPDATE' : ''}`, [tenantId, id]))[0];
  },

  /** Across tenants by design: a provider's status callback names only its own message id. */
  async getByProviderId(db: Queryable, provider: string, providerMessageId: string, lock = false): Promise<MessageRequestRow | undefined> {
    return (
      await db.query<MessageRequestRow>(`SELECT * FROM message_requests WHERE provider = $1 AND provider_message_id = $2${lock ? ' FOR NO KEY UPDATE' : ''}`, [
        provider,
        providerMessageId,
      ])
    )[0];
  },

  async hasUnreconciledFailure(db: Queryable, tenantId: string, recipientPhone: string): Promise<string | undefined> {
    const rows = await db.query<{ id: string }>(
      `SELECT id FROM message_requests WHERE tenant_id = $1 AND recipient_phone = $2 AND status = 'failed' AND reconciled_at IS NULL ORDER BY created_at DESC LIMIT 1`,
      [tenantId, recipientPhone],
    );
    return rows[0]?.id;
  },

  /**
   * Marks the provider call of a request that is still to be sent (queued, no provider id, no call under way) as
   * started, and returns it with its channel's sender id; undefined when the request is not in that state. Run
   * on its own (committed before the call), so that a crash leaves evidence.
   */
  async startDispatch(db: Queryable, tenantId: string, id: string, now: Date): Promise<(MessageRequestRow & { sender_ref: string | null }) | undefined> {
    const rows = await db.query<MessageRequestRow & { sender_ref: string | null }>(
      `UPDATE message_requests r SET dispatching_at = $3, dispatch_attempts = r.dispatch_attempts + 1, updated_at = $3
       WHERE r.tenant_id = $1 AND r.id = $2 AND r.status = 'queued' AND r.provider_message_id IS NULL AND r.dispatching_at IS NULL
       RETURNING r.*, (SELECT c.provider_ref FROM channels c WHERE c.id = r.channel_id AND c.tenant_id = r.tenant_id) AS sender_ref`,
      [tenantId, id, now],
    );
    return rows[0];
  },

  async noteUnknownOutcome(db: Queryable, tenantId: string, id: string, now: Date): Promise<void> {
    await db.query('UPDATE message_requests SET dispatching_at = NULL, unknown_outcomes = unknown_outcomes + 1, updated_at = $2 WHERE id = $1 AND tenant_id = $3', [
      id,
      now,
      tenantId,
    ]);
  },

  /** Records the provider's id for the request (locking its row for the rest of the transaction) and returns the row. */
  async recordAccepted(db: Queryable, tenantId: string, id: string, providerMessageId: string, now: Date): Promise<MessageRequestRow | undefined> {
    const rows = await db.query<MessageRequestRow>(
      `UPDATE message_requests SET provider_message_id = $2, dispatching_at = NULL, error_code = NULL, error_message = NULL, updated_at = $3
       WHERE id = $1 AND tenant_id = $4 RETURNING *`,
      [id, providerMessageId, now, tenantId],
    );
    return rows[0];
  },

  async recordDispatchError(db: Queryable, tenantId: string, id: string, error: { code: string; message: string }, now: Date): Promise<void> {
    await db.query(`UPDATE message_requests SET dispatching_at = NULL, error_code = $2, error_message = $3, updated_at = $4 WHERE id = $1 AND tenant_id = $5`, [
      id,
      error.code,
      error.message,
      now,
      tenantId,
    ]);
  },

  async setStatus(
    db: Queryable,
    tenantId: string,
    id: string,
    status: RequestStatus,
    error: { code: string; message: string } | null,
    now: Date,
  ): Promise<MessageRequestRow> {
    const rows = await db.query<MessageRequestRow>(
      `UPDATE message_requests SET status = $2, error_code = COALESCE($3, error_code), error_message = COALESCE($4, error_message), updated_at = $5
       WHERE id = $1 AND tenant_id = $6 RETURNING *`,
      [id, status, error?.code ?? null, error?.message ?? null, now, tenantId],
    );
    return rows[0];
  },

  async reconcile(db: Queryable, tenantId: string, id: string, now: Date): Promise<MessageRequestRow | undefined> {
    const rows = await db.query<MessageRequestRow>(
      `UPDATE message_requests SET reconciled_at = COALESCE(reconciled_at, $3), updated_at = $3 WHERE tenant_id = $1 AND id = $2 AND status = 'failed' RETURNING *`,
      [tenantId, id, now],
    );
    return rows[0];
  },
};
