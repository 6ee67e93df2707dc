import type { Db, Queryable } from '../db/driver.js';
import type { EventType } from './events.js';
import type { FailureCode } from './http-client.js';

/**
 * The dispatcher's hot statements (graphile-worker keeps its own in src/sql/ the same way). They work on
 * deliveries of every tenant by design: each row is addressed by id and fenced by this worker's lease, and
 * every row written carries the tenant id it was claimed with.
 */

/** A claimed delivery with everything its attempt needs. */
export interface ClaimedDelivery {
  id: string;
  tenant_id: string;
  event_id: string;
  event_type: EventType;
  subscription_id: string;
  cycle_attempts: number;
  body: string;
  url: string;
  host: string;
  active: boolean;
  deleted: boolean;
  secret_sealed: string;
  /** The owning key is in force (api_key_in_force: src/auth/sql/api_key_in_force.sql); its scopes are checked with hasScope. */
  key_ok: boolean;
  key_scopes: string[];
}

/** What a claim took, and where its round robin over subscriptions got to. */
export interface ClaimResult {
  deliveries: ClaimedDelivery[];
  /** When the earliest rate-limited subscription of this claim may send again. */
  pacedWakeAt: Date | null;
  /** Where the next claim starts: after the last subscription visited, or from the start once all were. */
  nextAfter: string;
}

interface ClaimMeta {
  paced_wake_at: Date | null;
  last_visited: string | null;
  visited: number;
}
/** The claim always answers one row at least: with no delivery in it when nothing was claimed. */
type ClaimRow = ClaimMeta & (ClaimedDelivery | { id: null });

export interface ClaimRequest {
  workerId: string;
  now: Date;
  leaseUntil: Date;
  /** Deliveries to claim at most. */
  limit: number;
  /** Subscriptions visited at most, in id order after `after` (round robin over subscriptions with pending work). */
  subscriptions: number;
  after: string;
  /** Per-host room of this worker (HostSlots); a host not listed gets `defaultRoom`. */
  hosts: string[];
  room: number[];
  defaultRoom: number;
}

/** What one attempt ended in, to be written to its delivery (fenced by the lease) and to the attempt log. */
export interface AttemptOutcome {
  deliveryId: string;
  tenantId: string;
  subscriptionId: string;
  status: 'delivered' | 'pending' | 'failed';
  nextAttemptAt: Date | null;
  httpStatus: number | null;
  failureCode: FailureCode | null;
  finishedAt: Date;
  startedAt: Date;
  durationMs: number;
  error: string | null;
}

/** A subscription the batch disabled for failing, and when. */
export interface DisabledSubscription {
  id: string;
  tenantId: string;
  at: Date;
}

const iso = (value: Date | null) => (value ? value.toISOString() : null);

/** The claim: src/webhooks/sql/webhook_claim.sql says how it chooses. */
const CLAIM_SQL = 'SELECT * FROM webhook_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)';

export const dispatchRepo = {
  /**
   * Claims due deliveries under a lease, per subscription, round robin: a full destination or a throttled
   * subscription holds up no other, and the cost never grows with the backlog (see webhook_claim).
   */
  async claim(db: Db, request: ClaimRequest): Promise<ClaimResult> {
    const params = [
      request.workerId,
      request.now,
      request.leaseUntil,
      request.limit,
      request.subscriptions,
      request.after,
      request.hosts,
      request.room,
      request.defaultRoom,
    ];
    const rows = await db.query<ClaimRow>(CLAIM_SQL, params);
    const meta = rows[0];
    return {
      deliveries: rows.filter((row): row is ClaimMeta & ClaimedDelivery => row.id !== null),
      pacedWakeAt: meta?.paced_wake_at ?? null,
      nextAfter: meta && meta.visited >= request.subscriptions && meta.last_visited !== null ? meta.last_visited : '',
    };
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

  /**
   * Writes a batch of outcomes (fenced by the lease), the attempt log and the subscriptions' health, in one
   * statement (webhook_record_outcomes, src/db/migrations/0016_webhook_health.sql); returns the subscriptions
   * that have now failed long enough to be disabled.
   */
  async record(
    db: Queryable,
    workerId: string,
    outcomes: AttemptOutcome[],
    autoDisable: { afterMs: number; minFailures: number },
  ): Promise<string[]> {
    const column = <T>(pick: (o: AttemptOutcome) => T) => outcomes.map(pick);
    const rows = await db.query<{ failing_id: string }>(
      'SELECT * FROM webhook_record_outcomes($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)',
      [
        workerId,
        column((o) => o.deliveryId),
        column((o) => o.tenantId),
        column((o) => o.subscriptionId),
        column((o) => o.status),
        column((o) => iso(o.nextAttemptAt)),
        column((o) => o.httpStatus),
        column((o) => o.failureCode),
        column((o) => o.finishedAt.toISOString()),
        column((o) => o.startedAt.toISOString()),
        column((o) => Math.round(o.durationMs)),
        column((o) => o.error),
        autoDisable.afterMs,
        autoDisable.minFailures,
      ],
    );
    return rows.map((row) => row.failing_id);
  },

  /**
   * Disables those of the given subscriptions that are (still) active and failing long enough, as of their
   * last failure; returns them. In the transaction that cancels their deliveries and emits the event.
   */
  async disableFailing(db: Queryable, subscriptionIds: string[], autoDisable: { afterMs: number; minFailures: number }): Promise<DisabledSubscription[]> {
    const rows = await db.query<{ id: string; tenant_id: string; last_failure_at: Date }>(
      `UPDATE webhook_subscriptions s SET active = false, disabled_reason = 'failing', updated_at = s.last_failure_at
       WHERE s.id = ANY ($1::text[]) AND s.active AND s.deleted_at IS NULL AND s.consecutive_failures >= $3
         AND s.failing_since <= s.last_failure_at - make_interval(secs => $2::float8 / 1000)
       RETURNING s.id, s.tenant_id, s.last_failure_at`,
      [subscriptionIds, autoDisable.afterMs, autoDisable.minFailures],
    );
    return rows.map((row) => ({ id: row.id, tenantId: row.tenant_id, at: row.last_failure_at }));
  },
};
