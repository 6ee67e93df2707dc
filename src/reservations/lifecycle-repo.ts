import type { Queryable, Tx } from '../db/driver.js';
import type { AttemptResult, LifecycleEvent } from './lifecycle-types.js';

export interface SettingRow {
  tenant_id: string;
  integration_id: string;
  event_type: string;
  enabled: boolean;
  channel_id: string | null;
  updated_at: Date;
}

export interface AttemptRow {
  id: number;
  tenant_id: string;
  reservation_id: string;
  event_type: LifecycleEvent;
  result: AttemptResult;
  reason: string;
  trigger_source: string;
  attempt_count: number;
  duplicate_count: number;
  sender_channel_id: string | null;
  sender_phone: string | null;
  sender_label: string | null;
  conversation_id: string | null;
  request_event_id: string | null;
  created_at: Date;
}

export type NewAttempt = Omit<AttemptRow, 'id' | 'created_at' | 'attempt_count'> & { now: Date };

export const settingsRepo = {
  async list(db: Queryable, tenantId: string): Promise<SettingRow[]> {
    return db.query<SettingRow>('SELECT * FROM lifecycle_settings WHERE tenant_id = $1', [tenantId]);
  },

  async get(db: Queryable, tenantId: string, integrationId: string, eventType: string): Promise<SettingRow | undefined> {
    const rows = await db.query<SettingRow>('SELECT * FROM lifecycle_settings WHERE tenant_id = $1 AND integration_id = $2 AND event_type = $3', [
      tenantId,
      integrationId,
      eventType,
    ]);
    return rows[0];
  },

  async upsert(db: Queryable, row: { tenantId: string; integrationId: string; eventType: string; enabled: boolean; channelId: string | null; now: Date }): Promise<void> {
    await db.query(
      `INSERT INTO lifecycle_settings (tenant_id, integration_id, event_type, enabled, channel_id, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (integration_id, event_type) DO UPDATE SET enabled = EXCLUDED.enabled, channel_id = EXCLUDED.channel_id, updated_at = EXCLUDED.updated_at
       WHERE lifecycle_settings.tenant_id = EXCLUDED.tenant_id`,
      [row.tenantId, row.integrationId, row.eventType, row.enabled, row.channelId, row.now],
    );
  },
};

export const attemptRepo = {
  /** Inserts an attempt; attempt_count is its ordinal among the evaluations of this reservation and event. */
  async insert(tx: Tx, row: NewAttempt): Promise<AttemptRow> {
    const rows = await tx.query<AttemptRow>(
      `INSERT INTO lifecycle_attempts (tenant_id, reservation_id, event_type, result, reason, trigger_source, attempt_count, duplicate_count,
         sender_channel_id, sender_phone, sender_label, conversation_id, request_event_id, created_at)
       VALUES ($1, $2, $3, $4, $5, $6,
         (SELECT count(*)::int + 1 FROM lifecycle_attempts WHERE tenant_id = $1 AND reservation_id = $2 AND event_type = $3),
         $7, $8, $9, $10, $11, $12, $13)
       RETURNING *`,
      [
        row.tenant_id,
        row.reservation_id,
        row.event_type,
        row.result,
        row.reason,
        row.trigger_source,
        row.duplicate_count,
        row.sender_channel_id,
        row.sender_phone,
        row.sender_label,
        row.conversation_id,
        row.request_event_id,
        row.now,
      ],
    );
    return rows[0];
  },

  /** The would_send attempt of this reservation and event, if one exists (at most one can). */
  async findSend(db: Queryable, tenantId: string, reservationId: string, eventType: string): Promise<AttemptRow | undefined> {
    const rows = await db.query<AttemptRow>(
      `SELECT * FROM lifecycle_attempts WHERE tenant_id = $1 AND reservation_id = $2 AND event_type = $3 AND result = 'would_send'`,
      [tenantId, reservationId, eventType],
    );
    return rows[0];
  },

  /** Counts one more suppressed duplicate on the original send; returns the new count. */
  async bumpDuplicate(tx: Tx, tenantId: string, attemptId: number): Promise<number> {
    const rows = await tx.query<{ duplicate_count: number }>(
      'UPDATE lifecycle_attempts SET duplicate_count = duplicate_count + 1 WHERE tenant_id = $1 AND id = $2 RETURNING duplicate_count',
      [tenantId, attemptId],
    );
    return rows[0]?.duplicate_count ?? 0;
  },

  /** The latest `limit` attempts of each reservation (newest first) and each reservation's total. */
  async latestFor(db: Queryable, tenantId: string, reservationIds: string[], limit: number): Promise<Array<AttemptRow & { total: number }>> {
    if (reservationIds.length === 0) return [];
    return db.query<AttemptRow & { total: number }>(
      `SELECT * FROM (
         SELECT a.*, row_number() OVER (PARTITION BY a.reservation_id ORDER BY a.id DESC) AS rn,
                count(*) OVER (PARTITION BY a.reservation_id)::int AS total
         FROM lifecycle_attempts a WHERE a.tenant_id = $1 AND a.reservation_id = ANY($2::text[])
       ) ranked WHERE rn <= $3 ORDER BY reservation_id, id DESC`,
      [tenantId, reservationIds, limit],
    );
  },
};

/**
 * Savepoints let one lifecycle evaluation fail (and be recorded as an `error` attempt) without
 * aborting the sync transaction around it: PostgreSQL refuses every statement after an error
 * until the transaction, or a savepoint, is rolled back.
 */
export const savepoints = {
  async open(tx: Tx): Promise<void> {
    await tx.query('SAVEPOINT lifecycle_evaluation');
  },
  async release(tx: Tx): Promise<void> {
    await tx.query('RELEASE SAVEPOINT lifecycle_evaluation');
  },
  async rollback(tx: Tx): Promise<void> {
    await tx.query('ROLLBACK TO SAVEPOINT lifecycle_evaluation');
  },
};

export interface SenderRow {
  id: string;
  name: string;
  phone_number: string | null;
}

export const senderRepo = {
  /** The tenant's available WhatsApp channels: the senders lifecycle messages may use. */
  async available(db: Queryable, tenantId: string): Promise<SenderRow[]> {
    return db.query<SenderRow>(
      `SELECT id, name, phone_number FROM channels WHERE tenant_id = $1 AND kind = 'whatsapp' AND available ORDER BY created_at, id`,
      [tenantId],
    );
  },
};
