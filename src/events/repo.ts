import type { Queryable } from '../db/driver.js';

/** A position in the event stream: the writer's transaction id (xid8, as text) and the event's order in it. */
export interface FeedPosition {
  x: string;
  s: number;
}

export interface FeedRow {
  tx_id: string;
  seq: number;
  body: string;
}

export interface FeedPage {
  /** The oldest transaction still in flight when the page was read: every event before it is final. */
  horizon: string;
  rows: FeedRow[];
}

export const eventRepo = {
  /**
   * Events of a tenant after `after`, oldest first, only those written by transactions older than the oldest
   * one still in flight (read in the same statement, so from the same snapshot). `types` null: every type.
   */
  async page(db: Queryable, tenantId: string, filter: { after: FeedPosition; types: readonly string[] | null; since: Date; limit: number }): Promise<FeedPage> {
    const rows = await db.query<{ horizon: string; tx_id: string | null; seq: number | null; body: string | null }>(
      `WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
       SELECT h.xmin::text AS horizon, e.tx_id::text AS tx_id, e.seq, e.body
       FROM h LEFT JOIN LATERAL (
         SELECT tx_id, seq, body FROM webhook_events
         WHERE tenant_id = $1 AND tx_id < h.xmin AND (tx_id, seq) > ($2::xid8, $3::int8)
           AND ($4::text[] IS NULL OR type = ANY ($4::text[])) AND occurred_at >= $5
         ORDER BY tx_id, seq LIMIT $6) e ON true`,
      [tenantId, filter.after.x, filter.after.s, filter.types, filter.since, filter.limit],
    );
    const page: FeedPage = { horizon: rows[0]?.horizon ?? filter.after.x, rows: [] };
    for (const row of rows) {
      if (row.tx_id !== null && row.seq !== null && row.body !== null) page.rows.push({ tx_id: row.tx_id, seq: row.seq, body: row.body });
    }
    return page;
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
