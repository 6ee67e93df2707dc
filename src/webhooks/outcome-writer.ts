import type { Queryable } from '../db/driver.js';
import type { FailureCode } from './http-client.js';

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

interface Waiting {
  outcome: AttemptOutcome;
  resolve: () => void;
  reject: (error: unknown) => void;
}

const iso = (value: Date | null) => (value ? value.toISOString() : null);

/**
 * Writes attempt outcomes in batches, group-commit style: when no write is running an outcome is written at
 * once (no added latency when traffic is light); outcomes that arrive while a write runs wait and go together
 * in the next one, so under load one statement and one commit serve many attempts. Each caller's promise
 * settles when its own outcome is committed: until then the dispatcher counts the attempt against its in-flight
 * bound (its destination's request slot is already free).
 */
export class OutcomeWriter {
  private queue: Waiting[] = [];
  private running = false;

  constructor(
    private readonly db: Queryable,
    private readonly workerId: string,
    private readonly maxBatch = 500,
  ) {}

  write(outcome: AttemptOutcome): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ outcome, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        await this.persist(batch.map((w) => w.outcome));
        for (const w of batch) w.resolve();
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
    }
    this.running = false;
  }

  /** One statement: the deliveries this worker still leases take their outcome; every attempt is logged. */
  private async persist(outcomes: AttemptOutcome[]): Promise<void> {
    const column = <T>(pick: (o: AttemptOutcome) => T) => outcomes.map(pick);
    await this.db.query(
      `WITH input AS (
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
         WHERE d.id = i.id AND d.locked_by = $11 AND d.status = 'pending'
         RETURNING d.id)
       INSERT INTO webhook_attempts (delivery_id, tenant_id, attempted_at, duration_ms, http_status, failure_code, error)
       SELECT i.id, i.tenant_id, i.started_at, i.duration_ms, i.http_status, i.failure_code, i.error FROM input i`,
      [
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
        this.workerId,
      ],
    );
  }
}
