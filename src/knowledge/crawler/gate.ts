/**
 * Politeness per host: at most `limit` requests at once, and with a Crawl-delay one request at a time with
 * at least `delayMs` between the starts of two requests; after a Retry-After, none until the host's time.
 * Waiters are served first come, first served.
 */
export class HostGate {
  private active = 0;
  private nextStart = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(
    private readonly limit: number,
    private readonly delayMs: number,
  ) {}

  /** The host asked to be left alone (Retry-After): no request starts before `until` (epoch ms). */
  pauseUntil(until: number): void {
    this.nextStart = Math.max(this.nextStart, until);
  }

  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.acquire(signal);
    try {
      const wait = this.nextStart - Date.now();
      if (wait > 0) await sleep(wait, signal);
      if (this.delayMs > 0) this.nextStart = Date.now() + this.delayMs;
      return await fn();
    } finally {
      this.release();
    }
  }

  private get capacity(): number {
    return this.delayMs > 0 ? 1 : this.limit;
  }

  private acquire(signal?: AbortSignal): Promise<void> {
    if (this.active < this.capacity) {
      this.active += 1;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const index = this.waiters.indexOf(grant);
        if (index >= 0) this.waiters.splice(index, 1);
        reject(signal?.reason ?? new Error('aborted'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(grant);
    });
  }

  private release(): void {
    const next = this.waiters.shift();
    // The slot passes straight to the next waiter; otherwise it is freed.
    if (next) next();
    else this.active -= 1;
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason ?? new Error('aborted'));
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
