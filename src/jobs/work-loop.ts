/**
 * The claim loop shared by the job runner and the webhook dispatcher: claim as much work as there are
 * free slots, start it, and sleep until woken (a notification, a finished task) or the poll interval ends.
 * Polling is the fallback that makes a lost wake-up harmless.
 */
export interface WorkLoopOptions {
  pollIntervalMs: number;
  maxInFlight: number;
  /**
   * Once a claim has taken everything due, the next one starts at least this long after it (default 0), so
   * work arriving in a steady trickle is claimed a batch at a time instead of one claim per wake-up.
   */
  batchWindowMs?: number;
  /**
   * Whether a finished unit makes the loop claim again: `always` (the default: work may have become claimable as the
   * unit freed what it held, as a webhook host's slot), or `when-behind`, only when the last claim could not take
   * everything due (new work announces itself with a wake-up).
   */
  wakeOnFinish?: 'always' | 'when-behind';
  /** Claims up to `limit` units of work and returns a runner for each. */
  claim: (limit: number) => Promise<Claimed>;
  onError: (error: unknown) => void;
}

export interface Claimed {
  units: Array<() => Promise<void>>;
  /** More may be due than the claim could take (it was capped by `limit` or by another bound). */
  more: boolean;
}

export class WorkLoop {
  private stopped = true;
  /** Units running. A count (not a set of their promises): nothing is added and removed per unit. */
  private inFlight = 0;
  private whenIdle: (() => void) | undefined;
  private wakeRequested = false;
  /** The last claim may have left work due (it was capped, or no slot was free). */
  private behind = false;
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
    return this.inFlight;
  }

  /** Stops claiming, then waits up to `graceMs` for running work; returns how many were still running. */
  async stop(graceMs: number): Promise<number> {
    this.stopped = true;
    this.wake();
    await this.loopDone;
    let timer: NodeJS.Timeout | undefined;
    const idle = new Promise<void>((resolve) => {
      this.whenIdle = resolve;
      if (this.inFlight === 0) resolve();
    });
    await Promise.race([idle, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    this.whenIdle = undefined;
    return this.inFlight;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      this.wakeRequested = false;
      const free = this.options.maxInFlight - this.inFlight;
      if (free <= 0) this.behind = true;
      const startedAt = Date.now();
      let claimed = 0;
      let more = true;
      if (free > 0) {
        try {
          const result = await this.options.claim(free);
          claimed = result.units.length;
          more = result.more;
          this.behind = more;
          for (const unit of result.units) this.track(unit);
        } catch (error) {
          this.options.onError(error);
        }
      }
      if (this.stopped) break;
      // A full batch means more may be waiting: loop at once if a slot is free.
      if (claimed > 0 && claimed === free && this.inFlight < this.options.maxInFlight) continue;
      if (!this.wakeRequested) await this.sleep(this.options.pollIntervalMs);
      if (!more) await this.pause(startedAt + (this.options.batchWindowMs ?? 0) - Date.now());
    }
  }

  private track(unit: () => Promise<void>): void {
    this.inFlight += 1;
    void (async () => {
      try {
        await unit();
      } catch (error) {
        this.options.onError(error);
      } finally {
        this.inFlight -= 1;
        if (this.inFlight === 0) this.whenIdle?.();
        if (this.options.wakeOnFinish !== 'when-behind' || this.behind) this.wake();
      }
    })();
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

  /** Waits `ms` however often the loop is woken meanwhile (the claim that follows covers those wakes), unless it stops. */
  private async pause(ms: number): Promise<void> {
    if (ms <= 0 || this.stopped) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeUp = () => {
        if (!this.stopped) return;
        clearTimeout(timer);
        resolve();
      };
    });
    this.wakeUp = undefined;
  }
}
