import type { Db, Queryable } from '../db/driver.js';
import type { EventType } from './events.js';
import type { FailureCode } from './http-client.js';

/**
 * The dispatcher's hot statements (graphile-worker keeps its own in src/sql/ the same way). They work on
 * deliveries of every tenant by design: each row is addressed by id and fenced by this worker's lease, and
 * every row written carries the tenant id it was claimed with.
 */

/** A due delivery this worker now leases, with what sending it needs. */
export interface ClaimedDelivery {
  id: string;
  tenant_id: string;
  event_id: string;
  event_type: EventType;
  cycle_attempts: number;
  body: string;
  url: string;
  host: string;
  active: boolean;
  deleted: boolean;
  secret_sealed: string;
  key_ok: boolean;
  key_scopes: string[];
}

export interface ClaimRequest {
  workerId: string;
  leaseUntil: Date;
  now: Date;
  /** Hosts with no room: none of theirs is claimed. */
  full: string[];
  limit: number;
  /** Due rows read (unlocked) to choose from. */
  candidates: number;
  /** Room of a host not listed in `hosts`. */
  defaultRoom: number;
  hosts: string[];
  room: number[];
}

/** What one attempt ended in, to be written to its delivery (fenced by the lease) and to the attempt log. */
export interface AttemptOutcome {
  deliveryId: string;
  tenantId: string;
  status: 'delivered' | 'pending' | 'failed';
  nextAttemptAt: Date | null;
  httpStatus: number | null;
  failureCode: FailureCode | null;
  finishedAt: Date;
  startedAt: Date;
  durationMs: number;
  error: string | null;
}

const CLAIM = `WITH candidates AS (
         SELECT d2.id, d2.next_attempt_at, s2.host FROM webhook_deliveries d2
         JOIN webhook_subscriptions s2 ON s2.id = d2.subscription_id
         WHERE d2.status = 'pending' AND d2.next_attempt_at <= $3
           AND (d2.locked_until IS NULL OR d2.locked_until < $3)
           AND NOT (s2.host = ANY ($4::text[]))
         ORDER BY d2.next_attempt_at
         LIMIT $6
       ), ranked AS (
         SELECT c.id, c.next_attempt_at, row_number() OVER (PARTITION BY c.host ORDER BY c.next_attempt_at, c.id) AS n,
                COALESCE(r.room, $7) AS room
         FROM candidates c LEFT JOIN unnest($8::text[], $9::int[]) AS r(host, room) ON r.host = c.host
       ), chosen AS (
         SELECT id FROM ranked WHERE n <= room ORDER BY next_attempt_at LIMIT $5
       ), claimed AS (
         UPDATE webhook_deliveries d SET locked_by = $1, locked_until = $2, updated_at = $3
         FROM (
           SELECT d3.id FROM webhook_deliveries d3
           WHERE d3.id IN (SELECT id FROM chosen) AND d3.status = 'pending' AND (d3.locked_until IS NULL OR d3.locked_until < $3)
           FOR UPDATE SKIP LOCKED) due
         WHERE d.id = due.id
         RETURNING d.id, d.tenant_id, d.event_id, d.event_type, d.subscription_id, d.cycle_attempts)
       SELECT c.id, c.tenant_id, c.event_id, c.event_type, c.cycle_attempts, e.body, s.url, s.host, s.active,
              s.deleted_at IS NOT NULL AS deleted, s.secret_sealed,
              (k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $3)) AS key_ok, k.scopes AS key_scopes
       FROM claimed c
       JOIN webhook_events e ON e.id = c.event_id
       JOIN webhook_subscriptions s ON s.id = c.subscription_id
       JOIN api_keys k ON k.id = s.owner_api_key_id`;

const WRITE_OUTCOMES = `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::int[], $6::text[], $7::timestamptz[], $8::timestamptz[], $9::int[], $10::text[])
           AS t(id, tenant_id, status, next_attempt_at, http_status, failure_code, finished_at, started_at, duration_ms, error)
       ), updated AS (
         UPDATE webhook_deliveries d SET
           status = i.status, attempts = d.attempts + 1, cycle_attempts = d.cycle_attempts + 1,
           next_attempt_at = i.next_attempt_at, http_status = i.http_status, failure_code = i.failure_code,
           delivered_at = CASE WHEN i.status = 'delivered' THEN i.finished_at ELSE d.delivered_at END,
           completed_at = CASE WHEN i.status = 'pending' THEN NULL ELSE i.finished_at END,
           locked_by = NULL, locked_until = NULL, updated_at = i.finished_at
         FROM input i
         WHERE d.id = i.id AND d.tenant_id = i.tenant_id AND d.locked_by = $11 AND d.status = 'pending'
         RETURNING d.id)
       INSERT INTO webhook_attempts (delivery_id, tenant_id, attempted_at, duration_ms, http_status, failure_code, error)
       SELECT i.id, i.tenant_id, i.started_at, i.duration_ms, i.http_status, i.failure_code, i.error FROM input i`;

const iso = (value: Date | null) => (value ? value.toISOString() : null);

export const dispatchRepo = {
  /**
   * Claims due deliveries, at most `room` per listed host: candidates are read first without locks, ranked per
   * host, then locked with SKIP LOCKED and re-checked, so two workers never claim the same row. A generic plan:
   * the claim's best plan is the same for every parameter value, and planning it cost more than running it.
   */
  claim(db: Db, r: ClaimRequest): Promise<ClaimedDelivery[]> {
    return db.queryCachedPlan<ClaimedDelivery>(CLAIM, [r.workerId, r.leaseUntil, r.now, r.full, r.limit, r.candidates, r.defaultRoom, r.hosts, r.room]);
  },

  /** Hands leases back (attempts claimed but never sent). */
  async handBack(db: Queryable, workerId: string, ids: string[]): Promise<void> {
    await db.query('UPDATE webhook_deliveries SET locked_by = NULL, locked_until = NULL WHERE id = ANY ($1::text[]) AND locked_by = $2', [ids, workerId]);
  },

  /** Cancels a leased delivery (subscription gone or disabled, owning key no longer allowed). */
  async cancel(db: Queryable, workerId: string, delivery: { id: string; tenant_id: string }, now: Date): Promise<void> {
    await db.query(
      `UPDATE webhook_deliveries SET status = 'canceled', completed_at = $3, updated_at = $3, next_attempt_at = NULL, locked_by = NULL, locked_until = NULL
       WHERE id = $1 AND locked_by = $2 AND status = 'pending' AND tenant_id = $4`,
      [delivery.id, workerId, now, delivery.tenant_id],
    );
  },

  /** One statement: the deliveries this worker still leases take their outcome; every attempt is logged. */
  async writeOutcomes(db: Queryable, workerId: string, outcomes: AttemptOutcome[]): Promise<void> {
    const column = <T>(pick: (o: AttemptOutcome) => T) => outcomes.map(pick);
    await db.query(WRITE_OUTCOMES, [
      column((o) => o.deliveryId),
      column((o) => o.tenantId),
      column((o) => o.status),
      column((o) => iso(o.nextAttemptAt)),
      column((o) => o.httpStatus),
      column((o) => o.failureCode),
      column((o) => o.finishedAt.toISOString()),
      column((o) => o.startedAt.toISOString()),
      column((o) => Math.round(o.durationMs)),
      column((o) => o.error),
      workerId,
    ]);
  },
};
