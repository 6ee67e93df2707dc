import type { Queryable } from '../db/driver.js';

/** A position in the event stream: the writer's transaction id (xid8, as text) and the event's order in it. */
export interface FeedPosition {
  x: string;
  s: number;
}

export interface FeedPage {
  /** The oldest transaction still in flight when the page was read: every event before it is final. */
  horizon: string;
  /** The bodies of the page's events (at most `limit`), oldest first, joined by commas ('' when none). */
  bodies: string;
  /** Whether more events follow the page (one more was found). */
  hasMore: boolean;
  /** The position of the page's last event when more follow. */
  last: FeedPosition | undefined;
}

export const eventRepo = {
  /**
   * A page of a tenant's events after `after`, oldest first, only those written by transactions older than
   * the oldest one still in flight (read in the same statement, so from the same snapshot). `types` null:
   * every type. One row comes back, the page's bodies already joined: the response splices them in as they are.
   */
  async page(db: Queryable, tenantId: string, filter: { after: FeedPosition; types: readonly string[] | null; since: Date; limit: number }): Promise<FeedPage> {
    const rows = await db.query<{ horizon: string; found: number; bodies: string | null; last_x: string | null; last_s: number | null }>(
      `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon, count(*)::int AS found,
              string_agg(p.body, ',' ORDER BY p.n) FILTER (WHERE p.n <= $6) AS bodies,
              min(p.tx_id::text) FILTER (WHERE p.n = $6) AS last_x, min(p.seq) FILTER (WHERE p.n = $6) AS last_s
       FROM (SELECT tx_id, seq, body, row_number() OVER (ORDER BY tx_id, seq) AS n
             FROM webhook_events
             WHERE tenant_id = $1 AND tx_id < pg_snapshot_xmin(pg_current_snapshot()) AND (tx_id, seq) > ($2::xid8, $3::int8)
               AND ($4::text[] IS NULL OR type = ANY ($4::text[])) AND occurred_at >= $5
             ORDER BY tx_id, seq LIMIT $6 + 1) p`,
      [tenantId, filter.after.x, filter.after.s, filter.types, filter.since, filter.limit],
    );
    const row = rows[0];
    if (!row) throw new Error('the feed page statement returned no row');
    const hasMore = row.found > filter.limit;
    return {
      horizon: row.horizon,
      bodies: row.bodies ?? '',
      hasMore,
      last: hasMore && row.last_x !== null && row.last_s !== null ? { x: row.last_x, s: row.last_s } : undefined,
    };
  },

  async get(db: Queryable, tenantId: string, eventId: string, since: Date): Promise<{ type: string; body: string } | undefined> {
    const rows = await db.query<{ type: string; body: string }>('SELECT type, body FROM webhook_events WHERE id = $1 AND tenant_id = $2 AND occurred_at >= $3', [
      eventId,
      tenantId,
      since,
    ]);
    return rows[0];
  },

  /**
   * Deletes up to `batch` events (of every tenant) that occurred before `cutoff` and that no delivery still
   * needs (delivery metadata has its own retention). One short statement per batch.
   */
  async purgeBatch(db: Queryable, cutoff: Date, batch: number): Promise<number> {
    const rows = await db.query(
      `DELETE FROM webhook_events WHERE id IN (
         SELECT e.id FROM webhook_events e
         WHERE e.created_at < $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
         LIMIT $2)
       RETURNING id`,
      [cutoff, batch],
    );
    return rows.length;
  },
};
