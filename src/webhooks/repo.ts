import type { Queryable } from '../db/driver.js';
import type { FailureCode } from './http-client.js';
import { cursorText, epochMicros, epochMs, olderThan } from '../db/sql.js';

export interface SubscriptionRow {
  id: string;
  tenant_id: string;
  url: string;
  host: string;
  events: string[];
  active: boolean;
  description: string | null;
  owner_api_key_id: string;
  secret_sealed: string;
  rate_limit_per_second: number | null;
  disabled_reason: 'failing' | null;
  consecutive_failures: number;
  last_success_at: Date | null;
  last_failure_at: Date | null;
  last_failure_code: FailureCode | null;
  created_at: Date;
  updated_at: Date;
}

/** The columns a new subscription is created with (health and pacing start empty). */
export type NewSubscriptionRow = Pick<
  SubscriptionRow,
  'id' | 'tenant_id' | 'url' | 'host' | 'events' | 'active' | 'description' | 'owner_api_key_id' | 'secret_sealed' | 'rate_limit_per_second'
>;

export interface DeliveryRow {
  id: string;
  tenant_id: string;
  event_id: string;
  event_type: string;
  subscription_id: string;
  status: 'pending' | 'delivered' | 'failed' | 'canceled';
  attempts: number;
  next_attempt_at: Date | null;
  http_status: number | null;
  failure_code: FailureCode | null;
  delivered_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A delivery as the list reads it: timestamps as epoch milliseconds, plus the exact cursor key (epoch µs). */
export interface DeliveryListRow
  extends Omit<DeliveryRow, 'tenant_id' | 'next_attempt_at' | 'delivered_at' | 'created_at' | 'updated_at'> {
  next_attempt_at: number | null;
  delivered_at: number | null;
  /** Epoch milliseconds, derived from `created_us`. */
  created_at: number;
  updated_at: number;
  /** Epoch microseconds: the exact keyset position. */
  created_us: number;
}

/** Where a recover has got to in a subscription's deliveries: (created_at with microseconds, id). */
export interface RecoverPosition {
  createdAt: string;
  id: string;
}

/** Before every delivery. */
export const RECOVER_START: RecoverPosition = { createdAt: '-infinity', id: '' };

export interface AttemptRow {
  id: number;
  attempted_at: Date;
  duration_ms: number;
  http_status: number | null;
  failure_code: string | null;
  error: string | null;
}

const live = 'deleted_at IS NULL';

export const subscriptionRepo = {
  async insert(
    db: Queryable,
    row: NewSubscriptionRow & { now: Date },
  ): Promise<SubscriptionRow> {
    const rows = await db.query<SubscriptionRow>(
      `INSERT INTO webhook_subscriptions (id, tenant_id, url, host, events, active, description, owner_api_key_id, secret_sealed, rate_limit_per_second, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING *`,
      [row.id, row.tenant_id, row.url, row.host, row.events, row.active, row.description, row.owner_api_key_id, row.secret_sealed, row.rate_limit_per_second, row.now],
    );
    return rows[0];
  },

  /** Serialises subscription creates of one tenant (the per-tenant limit is counted inside the lock). */
  async lockTenant(db: Queryable, tenantId: string): Promise<void> {
    await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`webhook-subscriptions:${tenantId}`]);
  },

  async count(db: Queryable, tenantId: string): Promise<number> {
    const rows = await db.query<{ count: number }>(`SELECT count(*)::int AS count FROM webhook_subscriptions WHERE tenant_id = $1 AND ${live}`, [tenantId]);
    return rows[0].count;
  },

  async list(db: Queryable, tenantId: string): Promise<SubscriptionRow[]> {
    return db.query<SubscriptionRow>(`SELECT * FROM webhook_subscriptions WHERE tenant_id = $1 AND ${live} ORDER BY created_at, id`, [tenantId]);
  },

  async get(db: Queryable, tenantId: string, id: string, lock = false): Promise<SubscriptionRow | undefined> {
    const rows = await db.query<SubscriptionRow>(
      `SELECT * FROM webhook_subscriptions WHERE id = $1 AND tenant_id = $2 AND ${live}${lock ? ' FOR UPDATE' : ''}`,
      [id, tenantId],
    );
    return rows[0];
  },

  async update(
    db: Queryable,
    tenantId: string,
    id: string,
    patch: {
      url: string;
      host: string;
      events: string[];
      active: boolean;
      description: string | null;
      ownerApiKeyId: string;
      rateLimitPerSecond: number | null;
      now: Date;
    },
  ): Promise<SubscriptionRow> {
    // Enabling clears the service's disabledReason and restarts the auto-disable clock (the failures stay counted).
    const rows = await db.query<SubscriptionRow>(
      `UPDATE webhook_subscriptions SET url = $3, host = $4, events = $5, active = $6, description = $7, owner_api_key_id = $8,
         rate_limit_per_second = $10, updated_at = $9,
         disabled_reason = CASE WHEN $6 THEN NULL ELSE disabled_reason END,
         failing_since = CASE WHEN $6 AND NOT active THEN NULL ELSE failing_since END
       WHERE id = $1 AND tenant_id = $2 AND ${live} RETURNING *`,
      [id, tenantId, patch.url, patch.host, patch.events, patch.active, patch.description, patch.ownerApiKeyId, patch.now, patch.rateLimitPerSecond],
    );
    return rows[0];
  },

  async setSecret(db: Queryable, tenantId: string, id: string, sealed: string, now: Date): Promise<SubscriptionRow | undefined> {
    const rows = await db.query<SubscriptionRow>(
      `UPDATE webhook_subscriptions SET secret_sealed = $3, updated_at = $4 WHERE id = $1 AND tenant_id = $2 AND ${live} RETURNING *`,
      [id, tenantId, sealed, now],
    );
    return rows[0];
  },

  async softDelete(db: Queryable, tenantId: string, id: string, now: Date): Promise<boolean> {
    const rows = await db.query(
      `UPDATE webhook_subscriptions SET deleted_at = $3, active = false, updated_at = $3 WHERE id = $1 AND tenant_id = $2 AND ${live} RETURNING id`,
      [id, tenantId, now],
    );
    return rows.length > 0;
  },
};

const cancelSet = `status = 'canceled', completed_at = $2, updated_at = $2, next_attempt_at = NULL, locked_by = NULL, locked_until = NULL`;

export const deliveryRepo = {
  /** Cancels pending deliveries of a subscription, optionally only those of the given event types. */
  async cancelForSubscription(db: Queryable, tenantId: string, subscriptionId: string, now: Date, eventTypes?: string[]): Promise<number> {
    const rows = await db.query(
      `UPDATE webhook_deliveries SET ${cancelSet}
       WHERE subscription_id = $1 AND status = 'pending' AND ($3::text[] IS NULL OR event_type = ANY ($3::text[])) AND tenant_id = $4 RETURNING id`,
      [subscriptionId, now, eventTypes ?? null, tenantId],
    );
    return rows.length;
  },

  /** Cancels pending deliveries of every subscription owned by a key (optionally only some event types). */
  async cancelForOwner(db: Queryable, tenantId: string, apiKeyId: string, now: Date, eventTypes?: string[]): Promise<number> {
    const rows = await db.query(
      `UPDATE webhook_deliveries SET ${cancelSet}
       WHERE status = 'pending' AND ($3::text[] IS NULL OR event_type = ANY ($3::text[])) AND tenant_id = $4
         AND subscription_id IN (SELECT id FROM webhook_subscriptions WHERE owner_api_key_id = $1 AND tenant_id = $4)
       RETURNING id`,
      [apiKeyId, now, eventTypes ?? null, tenantId],
    );
    return rows.length;
  },

  /**
   * One page of a live subscription's deliveries, newest first: undefined when the subscription does not
   * exist for the tenant (or was deleted). One statement for a page with rows; an empty page costs a second
   * one to tell "no deliveries" from "no subscription". Timestamps come back as epoch numbers.
   */
  async listPage(
    db: Queryable,
    tenantId: string,
    subscriptionId: string,
    filter: { status?: string; limit: number; after?: { createdAt: string; id: string } },
  ): Promise<DeliveryListRow[] | undefined> {
    const params: unknown[] = [tenantId, subscriptionId, filter.limit];
    let where = '';
    if (filter.status) {
      params.push(filter.status);
      where += ` AND d.status = $${params.length}`;
    }
    if (filter.after) {
      where += ` AND ${olderThan(params, 'd.created_at', 'd.id', { at: filter.after.createdAt, id: filter.after.id })}`;
    }
    const rows = await db.query<DeliveryListRow>(
      `SELECT d.id, d.event_id, d.event_type, d.subscription_id, d.status, d.attempts, d.http_status, d.failure_code,
              ${epochMs('d.next_attempt_at')} AS next_attempt_at, ${epochMs('d.delivered_at')} AS delivered_at,
              ${epochMicros('d.created_at')} AS created_us, ${epochMs('d.updated_at')} AS updated_at
       FROM webhook_deliveries d
       WHERE d.tenant_id = $1 AND d.subscription_id = $2${where}
         AND EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = $2 AND s.tenant_id = $1 AND s.${live})
       ORDER BY d.created_at DESC, d.id DESC LIMIT $3`,
      params,
    );
    if (rows.length === 0) return (await subscriptionRepo.get(db, tenantId, subscriptionId)) ? [] : undefined;
    for (const row of rows) row.created_at = Math.floor(row.created_us / 1000);
    return rows;
  },

  async get(db: Queryable, tenantId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
    const rows = await db.query<DeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = $1 AND tenant_id = $2 AND subscription_id = $3', [
      deliveryId,
      tenantId,
      subscriptionId,
    ]);
    return rows[0];
  },

  /** Starts a new cycle of attempts for a failed delivery; undefined when it is not failed. */
  async restart(db: Queryable, tenantId: string, deliveryId: string, now: Date): Promise<DeliveryRow | undefined> {
    const rows = await db.query<DeliveryRow>(
      `UPDATE webhook_deliveries SET status = 'pending', cycle_attempts = 0, next_attempt_at = $3, completed_at = NULL, updated_at = $3
       WHERE id = $1 AND tenant_id = $2 AND status = 'failed' RETURNING *`,
      [deliveryId, tenantId, now],
    );
    return rows[0];
  },

  /**
   * Restarts up to `batch` failed deliveries of a subscription whose event occurred in [since, until), the next
   * ones after `after` in (created_at, id) order: a new cycle with the same event. A delivery is created when
   * its event occurs, so the created_at range of the index of failed deliveries (webhook_deliveries_failed) bounds
   * the scan, and each batch starts where the previous one ended. Rows another transaction holds are skipped
   * (left for a later recover). `last` is where the next batch starts.
   */
  async restartFailedBatch(
    db: Queryable,
    tenantId: string,
    subscriptionId: string,
    window: { since: Date; until: Date },
    now: Date,
    after: RecoverPosition,
    batch: number,
  ): Promise<{ taken: number; restarted: number; last: RecoverPosition | undefined }> {
    const rows = await db.query<{ taken: number; restarted: number; last_at: string | null; last_id: string | null }>(
      `WITH batch AS (
         SELECT d2.id, d2.created_at FROM webhook_deliveries d2 JOIN webhook_events e ON e.id = d2.event_id
         WHERE d2.tenant_id = $1 AND d2.subscription_id = $2 AND d2.status = 'failed' AND d2.created_at >= $3
           AND (d2.created_at, d2.id) > ($6::timestamptz, $7::text) AND e.occurred_at >= $3 AND e.occurred_at < $4
         ORDER BY d2.created_at, d2.id LIMIT $8 FOR UPDATE OF d2 SKIP LOCKED
       ), restarted AS (
         UPDATE webhook_deliveries d SET status = 'pending', cycle_attempts = 0, next_attempt_at = $5, completed_at = NULL, updated_at = $5
         FROM batch b WHERE d.id = b.id AND d.tenant_id = $1 AND d.status = 'failed'
         RETURNING d.id
       )
       SELECT (SELECT count(*) FROM batch)::int AS taken, (SELECT count(*) FROM restarted)::int AS restarted, l.last_at, l.last_id
       FROM (SELECT 1) AS always_one_row LEFT JOIN (
         SELECT ${cursorText('b.created_at')} AS last_at, b.id AS last_id FROM batch b ORDER BY b.created_at DESC, b.id DESC LIMIT 1
       ) l ON true`,
      [tenantId, subscriptionId, window.since, window.until, now, after.createdAt, after.id, batch],
    );
    const row = rows[0];
    return {
      taken: row?.taken ?? 0,
      restarted: row?.restarted ?? 0,
      last: row?.last_at && row.last_id ? { createdAt: row.last_at, id: row.last_id } : undefined,
    };
  },

  async attempts(db: Queryable, tenantId: string, deliveryId: string): Promise<AttemptRow[]> {
    return db.query<AttemptRow>(
      'SELECT id, attempted_at, duration_ms, http_status, failure_code, error FROM webhook_attempts WHERE delivery_id = $1 AND tenant_id = $2 ORDER BY id',
      [deliveryId, tenantId],
    );
  },

  /** Deletes delivery metadata completed before `cutoff` (events have their own retention: src/events). */
  async purge(db: Queryable, cutoff: Date): Promise<number> {
    const deliveries = await db.query(`DELETE FROM webhook_deliveries WHERE status <> 'pending' AND completed_at < $1 RETURNING id`, [cutoff]);
    return deliveries.length;
  },
};

export const outboxRepo = {
  /**
   * The outbox row and its fan-out to the tenant's matching subscriptions, in one statement
   * (webhook_emit: src/webhooks/sql/webhook_emit.sql); returns how many deliveries it created.
   */
  async emit(db: Queryable, e: { tenantId: string; eventId: string; type: string; now: Date; body: string; readScope: string; writeScope: string }): Promise<number> {
    const rows = await db.query<{ count: number }>('SELECT webhook_emit($1, $2, $3, $4, $5, $6, $7) AS count', [
      e.tenantId,
      e.eventId,
      e.type,
      e.now,
      e.body,
      e.readScope,
      e.writeScope,
    ]);
    return rows[0]?.count ?? 0;
  },
};
