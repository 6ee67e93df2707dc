import type { Queryable } from '../db/driver.js';
import { equalIfGiven } from '../db/sql.js';
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
    const params: unknown[] = [tenantId, reservationId];
    const before = beforeIfGiven(params, 'id', page.beforeId);
    params.push(page.limit);
    return db.query<AttemptRow>(`SELECT * FROM lifecycle_attempts WHERE tenant_id = $1 AND reservation_id = $2${before} ORDER BY id DESC LIMIT $${params.length}`, params);
  },

  /** would_send attempts with the current status of the message each queued. */
  async receipts(db: Queryable, tenantId: string, filter: { integrationId?: string; eventType?: string }, page: { limit: number; beforeId?: number }): Promise<ReceiptRow[]> {
    const params: unknown[] = [tenantId];
    const where = equalIfGiven(params, { 'm.integration_id': filter.integrationId, 'a.event_type': filter.eventType }) + beforeIfGiven(params, 'a.id', page.beforeId);
    params.push(page.limit);
    return db.query<ReceiptRow>(
      `SELECT a.id, m.integration_id, m.provider_reservation_id, a.event_type, a.conversation_id, a.request_event_id, r.status, a.created_at
       FROM lifecycle_attempts a
       JOIN reservation_mirrors m ON m.id = a.reservation_id
       JOIN message_requests r ON r.id = a.request_event_id
       WHERE a.tenant_id = $1 AND a.result = 'would_send' AND a.conversation_id IS NOT NULL${where}
       ORDER BY a.id DESC LIMIT $${params.length}`,
      params,
    );
  },
};

/** ` AND column < $n` (a newest-first page by id) when a position is given. */
function beforeIfGiven(params: unknown[], column: string, beforeId: number | undefined): string {
  if (beforeId === undefined) return '';
  params.push(beforeId);
  return ` AND ${column} < $${params.length}`;
}
