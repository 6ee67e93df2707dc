import type { Queryable } from '../db/driver.js';
import type { LifecycleEvent } from './lifecycle-types.js';
import type { AttemptRow } from './lifecycle-repo.js';

export interface ReceiptRow {
  id: number;
  integration_id: string;
  provider_reservation_id: string;
  event_type: LifecycleEvent;
  conversation_id: string;
  request_event_id: string;
  status: 'queued' | 'sent' | 'delivered' | 'read' | 'failed';
  created_at: Date;
}

/** The lifecycle's history, newest first: a reservation's attempts, and the tenant's receipts (its queued sends). */
export const historyRepo = {
  async reservationId(db: Queryable, tenantId: string, integrationId: string, providerReservationId: string): Promise<string | undefined> {
    const rows = await db.query<{ id: string }>('SELECT id FROM reservation_mirrors WHERE tenant_id = $1 AND integration_id = $2 AND provider_reservation_id = $3', [
      tenantId,
      integrationId,
      providerReservationId,
    ]);
    return rows[0]?.id;
  },

  async attempts(db: Queryable, tenantId: string, reservationId: string, page: { limit: number; beforeId?: number }): Promise<AttemptRow[]> {
    return db.query<AttemptRow>(
      `SELECT * FROM lifecycle_attempts WHERE tenant_id = $1 AND reservation_id = $2 AND ($3::bigint IS NULL OR id < $3)
       ORDER BY id DESC LIMIT $4`,
      [tenantId, reservationId, page.beforeId ?? null, page.limit],
    );
  },

  /** would_send attempts with the current status of the message each queued. */
  async receipts(db: Queryable, tenantId: string, filter: { integrationId?: string; eventType?: string }, page: { limit: number; beforeId?: number }): Promise<ReceiptRow[]> {
    return db.query<ReceiptRow>(
      `SELECT a.id, m.integration_id, m.provider_reservation_id, a.event_type, a.conversation_id, a.request_event_id, r.status, a.created_at
       FROM lifecycle_attempts a
       JOIN reservation_mirrors m ON m.id = a.reservation_id
       JOIN message_requests r ON r.id = a.request_event_id
       WHERE a.tenant_id = $1 AND a.result = 'would_send' AND a.conversation_id IS NOT NULL
         AND ($2::text IS NULL OR m.integration_id = $2) AND ($3::text IS NULL OR a.event_type = $3)
         AND ($4::bigint IS NULL OR a.id < $4)
       ORDER BY a.id DESC LIMIT $5`,
      [tenantId, filter.integrationId ?? null, filter.eventType ?? null, page.beforeId ?? null, page.limit],
    );
  },
};
