/**
 * The claim loop shared by the job runner and the webhook dispatcher: claim as much work as there are
 * free slots, start it, and sleep until woken (a notification, a finished task) or the poll interval ends.
 * Polling is the fallback that makes a lost wake-up harmless.
 */
export interface WorkLoopOptions {
  pollIntervalMs: number;
  maxInFlight: number;
  /** Claims up to `limit` units of work and returns a runner for each. */
  claim: (limit: number) => Promise<Array<() => Promise<void>>>;
  onError: (error: unknown) => void;
}

export class WorkLoop {
  private stopped = true;
  private readonly inFlight = new Set<Promise<void>>();
  private wakeRequested = false;
  private wakeUp: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;

  constructor(private readonly options: WorkLoopOptions) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loopDone = this.run();
  }

  /** Ask the loop to look for work now. */
  wake(): void {
    this.wakeRequested = true;
    this.wakeUp?.();
  }

  get running(): number {
    return this.inFlight.size;
  }

  /** Stops claiming, then waits up to `graceMs` for running work; returns how many were still running. */
  async stop(graceMs: number): Promise<number> {
    this.stopped = true;
    this.wake();
    await this.loopDone;
    const all = Promise.allSettled([...this.inFlight]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    return this.inFlight.size;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      this.wakeRequested = false;
      const free = this.options.maxInFlight - this.inFlight.size;
      let claimed = 0;
      if (free > 0) {
        try {
          const units = await this.options.claim(free);
          claimed = units.length;
          for (const unit of units) this.track(unit);
        } catch (error) {
          this.options.onError(error);
        }
      }
      if (this.stopped) break;
      // A full batch means more may be waiting: loop at once if a slot is free.
      if (claimed > 0 && claimed === free && this.inFlight.size < this.options.maxInFlight) continue;
      if (!this.wakeRequested) await this.sleep(this.options.pollIntervalMs);
    }
  }

  private track(unit: () => Promise<void>): void {
    const promise = (async () => {
      try {
        await unit();
      } catch (error) {
        this.options.onError(error);
      }
    })();
    this.inFlight.add(promise);
    void promise.finally(() => {
      this.inFlight.delete(promise);
      this.wake();
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
  }
}
