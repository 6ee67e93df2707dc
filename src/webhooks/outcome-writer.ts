import type { Db } from '../db/driver.js';
import { emit } from './events.js';
import { dispatchRepo, type AttemptOutcome } from './dispatch-repo.js';
import { deliveryRepo } from './repo.js';

export type { AttemptOutcome };

interface Waiting {
  outcome: AttemptOutcome;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** What the writer needs of the database: transactions, and whether other connections can race it. */
export type OutcomeDb = Pick<Db, 'query' | 'transaction' | 'kind'>;

export interface AutoDisable {
  /** A subscription whose every attempt failed for this long is disabled (WEBHOOK_AUTO_DISABLE_AFTER_MS). */
  afterMs: number;
  /** ... and only after at least this many failed attempts. */
  minFailures: number;
}

export const AUTO_DISABLE_MIN_FAILURES = 10;

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
  private gathering = false;

  constructor(
    private readonly db: OutcomeDb,
    private readonly workerId: string,
    private readonly autoDisable: AutoDisable,
    private readonly maxBatch = 500,
  ) {}

  write(outcome: AttemptOutcome): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ outcome, resolve, reject });
      if (this.running) return;
      if (this.db.kind === 'postgres') void this.drain();
      else if (!this.gathering) {
        // PGlite runs on this thread: a write started at once would run before the answers already received are
        // even read, so every outcome would be a batch of its own. Gather what the current I/O phase delivers.
        this.gathering = true;
        setImmediate(() => {
          this.gathering = false;
          if (!this.running) void this.drain();
        });
      }
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

  /**
   * One statement (dispatchRepo.record): the deliveries this worker still leases take their outcome, every
   * attempt is logged and the subscriptions' health takes the applied outcomes. A subscription that has failed
   * long enough is then disabled in a transaction of its own that also cancels its pending deliveries and
   * emits webhook.subscription.disabled.
   */
  private async persist(outcomes: AttemptOutcome[]): Promise<void> {
    const failing = await dispatchRepo.record(this.db, this.workerId, outcomes, this.autoDisable);
    if (failing.length === 0) return;
    await this.db.transaction(async (tx) => {
      for (const subscription of await dispatchRepo.disableFailing(tx, failing, this.autoDisable)) {
        await deliveryRepo.cancelForSubscription(tx, subscription.tenantId, subscription.id, subscription.at);
        await emit(tx, subscription.at, subscription.tenantId, 'webhook.subscription.disabled', { subscriptionId: subscription.id, reason: 'failing' });
      }
    });
  }
}
