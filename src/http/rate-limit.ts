/**
 * Per-key token buckets kept in this process. With several API nodes each node enforces the limit
 * on its own share of traffic (see docs/decisions.md).
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until one request is allowed (only when refused). */
  retryAfterSeconds: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private lastSweep = 0;

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.timeOrigin + performance.now(),
  ) {}

  take(key: string): RateDecision {
    const now = this.now();
    this.sweep(now);
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, updatedAt: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.ratePerSecond);
    bucket.updatedAt = now;
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.buckets.set(key, bucket);
    return {
      allowed,
      limit: this.burst,
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil((this.burst - bucket.tokens) / this.ratePerSecond),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - bucket.tokens) / this.ratePerSecond)),
    };
  }

  /** Forget buckets that have refilled completely, so memory follows active keys only. */
  private sweep(now: number): void {
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.ratePerSecond >= this.burst) this.buckets.delete(key);
    }
  }
}
