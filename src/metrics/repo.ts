import type { Queryable } from '../db/driver.js';

export interface QueueRow {
  task: string;
  depth: number;
  oldest_seconds: number;
}

/** Jobs waiting to run (queued and due) per task, and how long the oldest has been due. */
export async function dueJobsByTask(db: Queryable, now: Date): Promise<QueueRow[]> {
  return db.query<QueueRow>(
    `SELECT task, count(*)::int AS depth, coalesce(extract(epoch FROM ($1::timestamptz - min(run_at))), 0)::float8 AS oldest_seconds
       FROM jobs WHERE state = 'queued' AND run_at <= $1 GROUP BY task`,
    [now],
  );
}

export interface DeliveryLagRow {
  due: number;
  lag_seconds: number;
}

/**
 * Webhook deliveries due now that no worker holds, and how late the most overdue one is (the delivery lag).
 * A delivery under a live lease is being attempted, so it counts once its lease lapses or its outcome lands.
 */
export async function deliveryLag(db: Queryable, now: Date): Promise<DeliveryLagRow> {
  const rows = await db.query<DeliveryLagRow>(
    `SELECT count(*)::int AS due, coalesce(extract(epoch FROM ($1::timestamptz - min(next_attempt_at))), 0)::float8 AS lag_seconds
       FROM webhook_deliveries
      WHERE status = 'pending' AND next_attempt_at <= $1 AND (locked_until IS NULL OR locked_until < $1)`,
    [now],
  );
  return rows[0] ?? { due: 0, lag_seconds: 0 };
}
