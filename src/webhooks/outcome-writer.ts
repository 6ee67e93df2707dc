import type { Queryable } from '../db/driver.js';
import { dispatchRepo, type AttemptOutcome } from './dispatch-repo.js';

export type { AttemptOutcome };

interface Waiting {
  outcome: AttemptOutcome;
  resolve: () => void;
  reject: (error: unknown) => void;
}

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

  private persist(outcomes: AttemptOutcome[]): Promise<void> {
    return dispatchRepo.writeOutcomes(this.db, this.workerId, outcomes);
  }
}
