import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RateLimiter, rateDecision, type KeyRateLimit, type RateDecision } from './rate-limit.js';

/**
 * One token bucket per key in Redis, read and updated by a single script (atomic on the server, one round
 * trip), with Redis's own clock so that nodes with skewed clocks agree. Tokens are stored as text to keep
 * fractions (a Lua number returned to a client is truncated to an integer).
 */
const TAKE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, tostring(tokens)}
`;
const TAKE_SHA = createHash('sha1').update(TAKE_SCRIPT).digest('hex');

/** A Redis answer slower than this counts as Redis being away: the request is decided locally instead. */
const COMMAND_TIMEOUT_MS = 250;

export interface SharedRateLimitOptions {
  url: string;
  keyPrefix: string;
  ratePerSecond: number;
  burst: number;
  log: Logger;
}

/**
 * The per-key limit shared by every API node through Redis. When Redis cannot answer, requests are decided
 * by this process's own buckets (the API keeps serving; the limit is per node meanwhile), which is logged
 * once; the client reconnects by itself and the shared buckets are used again as soon as it is ready.
 */
export class SharedRateLimit implements KeyRateLimit {
  private readonly redis: Redis;
  private readonly local: RateLimiter;
  private degraded = false;

  constructor(private readonly options: SharedRateLimitOptions) {
    this.local = new RateLimiter(options.ratePerSecond, options.burst);
    this.redis = new Redis(options.url, {
      // Fail fast instead of queueing requests while disconnected: the local bucket answers meanwhile.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: 2_000,
      // Concurrent requests share round trips.
      enableAutoPipelining: true,
      retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5_000),
      lazyConnect: false,
    });
    // Connection errors are reported through `take` falling back (logged once); ioredis retries by itself.
    this.redis.on('error', () => undefined);
    this.redis.on('ready', () => {
      if (!this.degraded) return;
      this.degraded = false;
      this.options.log.info('Redis is reachable again: the rate limit is shared by every API node again');
    });
  }

  /**
   * Waits (at most `timeoutMs`) for the first connection, so that a node's first requests already use the
   * shared buckets; when Redis is not there yet the node starts anyway, with its own buckets.
   */
  async connected(timeoutMs = 2_000): Promise<boolean> {
    if (this.redis.status === 'ready') return true;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.redis.off('ready', onReady);
        resolve(false);
      }, timeoutMs);
      const onReady = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.redis.once('ready', onReady);
    });
  }

  async take(key: string): Promise<RateDecision> {
    const { ratePerSecond, burst, keyPrefix } = this.options;
    const bucketKey = `${keyPrefix}ratelimit:${key}`;
    try {
      const reply = await this.run(bucketKey, ratePerSecond, burst);
      if (!Array.isArray(reply) || typeof reply[0] !== 'number' || typeof reply[1] !== 'string') throw new Error('unexpected reply from the rate limit script');
      return rateDecision(reply[0] === 1, Number(reply[1]), ratePerSecond, burst);
    } catch (error) {
      if (!this.degraded) {
        this.degraded = true;
        this.options.log.warn({ reason: error instanceof Error ? error.message : String(error) }, 'Redis is unreachable: rate limiting per process until it is back');
      }
      return this.local.take(key);
    }
  }

  /** EVALSHA, and EVAL once when Redis does not know the script yet (first use, or after a restart). */
  private async run(key: string, rate: number, burst: number): Promise<unknown> {
    try {
      return await this.redis.evalsha(TAKE_SHA, 1, key, rate, burst);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return await this.redis.eval(TAKE_SCRIPT, 1, key, rate, burst);
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect();
    await this.local.close();
  }
}
