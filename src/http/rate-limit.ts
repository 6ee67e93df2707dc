/**
 * Per-key token buckets. Without REDIS_URL they are kept in this process (each API node enforces the limit
 * on its own share of traffic); with it, every node shares one bucket per key (./shared-rate-limit.ts).
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

/** A per-key limit, local or shared; `take` spends one token of `key`'s bucket. */
export interface KeyRateLimit {
  take(key: string): RateDecision | Promise<RateDecision>;
  close(): Promise<void>;
}

/** The answer for a bucket left with `tokens` after the request was allowed or refused. */
export function rateDecision(allowed: boolean, tokens: number, ratePerSecond: number, burst: number): RateDecision {
  return {
    allowed,
    limit: burst,
    remaining: Math.floor(tokens),
    resetSeconds: Math.ceil((burst - tokens) / ratePerSecond),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / ratePerSecond)),
  };
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class RateLimiter implements KeyRateLimit {
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
    return rateDecision(allowed, bucket.tokens, this.ratePerSecond, this.burst);
  }

  async close(): Promise<void> {
    this.buckets.clear();
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
