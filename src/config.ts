/** Environment → validated, typed configuration. Fails fast with a message naming the variable. */

export type Role = 'api' | 'worker' | 'all';

export interface Config {
  role: Role;
  host: string;
  port: number;
  databaseUrl: string | undefined;
  /** PostgreSQL schema to use (tests give each run its own); default `public`. */
  databaseSchema: string | undefined;
  dataDir: string;
  /** Where uploaded knowledge bytes live (BLOB_STORE): files under DATA_DIR/blobs (in memory with memory://), or an S3 bucket. */
  blobStore: { kind: 'filesystem' } | S3Config;
  adminToken: string | undefined;
  mcpEnabled: boolean;
  allowPrivateDestinations: boolean;
  webhookRetryDelaysMs: number[];
  webhookAttemptTimeoutMs: number;
  webhookMaxInFlight: number;
  webhookMaxInFlightPerHost: number;
  /** A subscription whose every attempt failed for this long (and at least 10 times) is disabled. */
  webhookAutoDisableAfterMs: number;
  secretKey: Buffer | undefined;
  rateLimitRps: number;
  rateLimitBurst: number;
  /** Messages one webchat session may post per minute (decisions 7.3). */
  webchatRateLimitPerMinute: number;
  /** Request bodies past their first 64 KiB are read at most this fast, all requests of the node together. */
  bodyBytesPerSecond: number;
  /** How long a resolved API key may be served from memory (0: never); key changes clear it at once. */
  apiKeyCacheTtlMs: number;
  jobPollIntervalMs: number;
  /** On SIGTERM, how long running jobs and webhook attempts may take to finish before they are ended and handed back. */
  shutdownGraceMs: number;
  logLevel: string;
  /** Meta's Graph API and callbacks (decisions 7.1); every channel names its own provider. */
  meta: {
    appSecret: string | undefined;
    verifyToken: string | undefined;
    systemUserToken: string | undefined;
    graphBaseUrl: string;
    graphApiVersion: string;
  };
  /** Variables of earlier releases still read (as fallbacks) or now ignored: logged at start as deprecated. */
  deprecatedVariables: string[];
  /** Inbound media larger than this end `failed` with reason `too_large`. */
  mediaMaxBytes: number;
  /** How often the workers read every whatsapp_cloud channel's templates from Meta. */
  templateSyncIntervalMs: number;
  /** The old CHANNEL_PROVIDER, read only to carry its channels over once (src/channels/legacy.ts). */
  legacyChannelProvider: string | undefined;
  sendTimeoutMs: number;
  sendMaxAttempts: number;
  crmAutomationIntervalMs: number;
  /** Knowledge url sources: deadline and size cap of one page fetch. */
  knowledgeFetchTimeoutMs: number;
  knowledgeFetchMaxBytes: number;
  /** pre_checkin is due this many days before check-in (business timezone). */
  lifecyclePreCheckinDays: number;
  /** Website crawler: politeness, deadlines and caps (src/knowledge/crawler). */
  crawl: {
    concurrencyPerHost: number;
    fetchTimeoutMs: number;
    maxPageBytes: number;
    maxDelayMs: number;
    userAgent: string;
    /** How often the workers look for websites due for a recrawl, and how many crawls one look starts at most. */
    recrawlCheckMs: number;
    recrawlBatch: number;
    /** A crawl's deadline: no request starts after it, no Retry-After is waited for past it. */
    deadlineMs: number;
  };
  /** Prometheus metrics port (METRICS_PORT); unset: no metrics. */
  metricsPort: number | undefined;
  /** REDIS_URL: the per-key rate limit is shared by every API node through this Redis; unset: per process. */
  redis: { url: string; keyPrefix: string } | undefined;
  /** An OpenAI-compatible embeddings endpoint; unset: the local hashing embedder. */
  embeddings: { url: string; apiKey: string | undefined; model: string; timeoutMs: number } | undefined;
}

/** BLOB_STORE=s3: an S3 or S3-compatible (MinIO, R2, ...) bucket. */
export interface S3Config {
  kind: 's3';
  bucket: string;
  region: string;
  /** Unset: AWS S3 itself. */
  endpoint: string | undefined;
  forcePathStyle: boolean;
  /** Both set, or both unset (then the AWS SDK's default credential chain: AWS_* variables, profile, instance role). */
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
  /** Prepended to every key with a `/`, without leading or trailing slashes. */
  prefix: string | undefined;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
  }
  return value;
}

function bool(env: Env, name: string): boolean {
  const raw = (env[name] ?? '').toLowerCase();
  if (raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function retryDelays(env: Env): number[] {
  const raw = env.WEBHOOK_RETRY_DELAYS_MS;
  if (!raw) return [60_000, 300_000, 1_800_000, 7_200_000, 28_800_000, 86_400_000];
  const delays = raw.split(',').map((part) => Number(part.trim()));
  if (delays.length !== 6 || delays.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new ConfigError('WEBHOOK_RETRY_DELAYS_MS must be six comma-separated non-negative integers (milliseconds)');
  }
  return delays;
}

function secretKey(env: Env): Buffer | undefined {
  const raw = env.SECRET_KEY;
  if (!raw) return undefined;
  const decoded = /^[0-9a-fA-F]+$/.test(raw) && raw.length % 2 === 0 ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
  if (decoded.length < 32) throw new ConfigError('SECRET_KEY must hold at least 32 random bytes (hex or base64)');
  return decoded;
}

function role(argv: string[]): Role {
  const index = argv.indexOf('--role');
  const inline = argv.find((arg) => arg.startsWith('--role='));
  const value = inline ? inline.slice('--role='.length) : index >= 0 ? argv[index + 1] : 'all';
  if (value !== 'api' && value !== 'worker' && value !== 'all') {
    throw new ConfigError(`--role must be api, worker or all, got "${value}"`);
  }
  return value;
}

/** META_* and, as fallbacks of earlier releases, WHATSAPP_*; CHANNEL_PROVIDER is gone (each channel has its provider). */
function meta(env: Env): { meta: Config['meta']; deprecatedVariables: string[]; legacyChannelProvider: string | undefined } {
  const deprecated: string[] = [];
  const pick = (name: string, legacy: string): string | undefined => {
    if (env[legacy]) deprecated.push(legacy);
    return env[name] || env[legacy] || undefined;
  };
  if (env.CHANNEL_PROVIDER) deprecated.push('CHANNEL_PROVIDER');
  const graphBaseUrl = (pick('META_GRAPH_BASE_URL', 'WHATSAPP_GRAPH_BASE_URL') ?? 'https://graph.facebook.com').replace(/\/+$/, '');
  if (!hasProtocol(graphBaseUrl, ['https:', 'http:'])) throw new ConfigError(`META_GRAPH_BASE_URL must be an http(s) URL, got "${graphBaseUrl}"`);
  return {
    meta: {
      appSecret: pick('META_APP_SECRET', 'WHATSAPP_APP_SECRET'),
      verifyToken: pick('META_VERIFY_TOKEN', 'WHATSAPP_VERIFY_TOKEN'),
      systemUserToken: pick('META_SYSTEM_USER_TOKEN', 'WHATSAPP_ACCESS_TOKEN'),
      graphBaseUrl,
      graphApiVersion: pick('META_GRAPH_API_VERSION', 'WHATSAPP_API_VERSION') ?? 'v23.0',
    },
    deprecatedVariables: deprecated,
    legacyChannelProvider: env.CHANNEL_PROVIDER || undefined,
  };
}

/** Whether `value` parses as a URL with one of `protocols` (`'https:'`, …). */
function hasProtocol(value: string, protocols: readonly string[]): boolean {
  try {
    return protocols.includes(new URL(value).protocol);
  } catch {
    return false;
  }
}

function embeddings(env: Env): Config['embeddings'] {
  const url = env.EMBEDDINGS_URL;
  if (!url) return undefined;
  if (!hasProtocol(url, ['http:', 'https:'])) throw new ConfigError(`EMBEDDINGS_URL must be an http(s) URL of an embeddings endpoint, got "${url}"`);
  return { url, apiKey: env.EMBEDDINGS_API_KEY || undefined, model: env.EMBEDDINGS_MODEL || 'text-embedding-3-small', timeoutMs: int(env, 'EMBEDDINGS_TIMEOUT_MS', 30_000, 100, 300_000) };
}

function redis(env: Env): Config['redis'] {
  const url = env.REDIS_URL;
  if (!url) return undefined;
  // The value is not echoed: it may hold a password.
  if (!hasProtocol(url, ['redis:', 'rediss:'])) throw new ConfigError('REDIS_URL must be a redis:// or rediss:// URL, such as redis://127.0.0.1:6379');
  const keyPrefix = env.REDIS_KEY_PREFIX ?? 'm2m:';
  if (!/^[A-Za-z0-9:._-]{0,100}$/.test(keyPrefix)) throw new ConfigError('REDIS_KEY_PREFIX must be at most 100 letters, digits, ":", ".", "_" or "-"');
  return { url, keyPrefix };
}

function blobStore(env: Env): Config['blobStore'] {
  const kind = env.BLOB_STORE || 'filesystem';
  if (kind === 'filesystem') return { kind };
  if (kind !== 's3') throw new ConfigError(`BLOB_STORE must be filesystem or s3, got "${kind}"`);
  const bucket = env.S3_BUCKET;
  if (!bucket) throw new ConfigError('BLOB_STORE=s3 needs S3_BUCKET (the bucket that keeps uploaded knowledge files)');
  if (!/^[A-Za-z0-9._-]{3,255}$/.test(bucket)) throw new ConfigError(`S3_BUCKET must be a bucket name (letters, digits, ".", "-", "_"), got "${bucket}"`);
  const region = env.S3_REGION || 'us-east-1';
  if (!/^[a-z0-9-]{1,64}$/.test(region)) throw new ConfigError(`S3_REGION must be a region name such as us-east-1 (or auto for R2), got "${region}"`);
  const endpoint = env.S3_ENDPOINT || undefined;
  if (endpoint !== undefined) {
    try {
      const parsed = new URL(endpoint);
      if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.username || parsed.password) throw new Error('endpoint');
    } catch {
      // The value is not echoed: it may hold credentials.
      throw new ConfigError('S3_ENDPOINT must be an http(s) URL without credentials in it, such as https://minio.internal:9000');
    }
  }
  const accessKeyId = env.S3_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.S3_SECRET_ACCESS_KEY || undefined;
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new ConfigError('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together: set both, or neither to use the AWS default credential chain');
  }
  const prefix = (env.S3_PREFIX ?? '').replace(/^\/+|\/+$/g, '') || undefined;
  if (prefix !== undefined && (prefix.length > 512 || !/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(prefix) || prefix.split('/').some((part) => part === '.' || part === '..'))) {
    throw new ConfigError('S3_PREFIX must be path segments of letters, digits, ".", "-" and "_" separated by "/" (at most 512 characters)');
  }
  return { kind, bucket, region, endpoint, forcePathStyle: bool(env, 'S3_FORCE_PATH_STYLE'), accessKeyId, secretAccessKey, prefix };
}

export function loadConfig(env: Env = process.env, argv: string[] = process.argv.slice(2)): Config {
  const schema = env.DATABASE_SCHEMA || undefined;
  // At most 30 characters: wake-up channels are named `<schema>.<channel>` within PostgreSQL's 63 bytes (src/jobs/queue.ts).
  if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,29}$/.test(schema)) {
    throw new ConfigError('DATABASE_SCHEMA must be a lowercase SQL identifier of at most 30 characters');
  }
  return {
    role: role(argv),
    host: env.HOST || '127.0.0.1',
    port: int(env, 'PORT', 8080, 0, 65535),
    databaseUrl: env.DATABASE_URL || undefined,
    databaseSchema: schema,
    dataDir: env.DATA_DIR || './data',
    blobStore: blobStore(env),
    adminToken: env.ADMIN_TOKEN || undefined,
    mcpEnabled: bool(env, 'MCP_ENABLED'),
    allowPrivateDestinations: bool(env, 'UNSAFE_ALLOW_PRIVATE_DESTINATIONS'),
    webhookRetryDelaysMs: retryDelays(env),
    webhookAttemptTimeoutMs: int(env, 'WEBHOOK_ATTEMPT_TIMEOUT_MS', 10_000, 50, 60_000),
    webhookMaxInFlight: int(env, 'WEBHOOK_MAX_IN_FLIGHT', 256, 1, 10_000),
    webhookMaxInFlightPerHost: int(env, 'WEBHOOK_MAX_IN_FLIGHT_PER_HOST', 64, 1, 10_000),
    webhookAutoDisableAfterMs: int(env, 'WEBHOOK_AUTO_DISABLE_AFTER_MS', 5 * 24 * 60 * 60 * 1000, 1, 365 * 24 * 60 * 60 * 1000),
    secretKey: secretKey(env),
    rateLimitRps: int(env, 'RATE_LIMIT_RPS', 20, 1, 1_000_000),
    rateLimitBurst: int(env, 'RATE_LIMIT_BURST', 100, 1, 1_000_000),
    webchatRateLimitPerMinute: int(env, 'WEBCHAT_RATE_LIMIT_PER_MINUTE', 30, 1, 1_000_000),
    bodyBytesPerSecond: int(env, 'BODY_BYTES_PER_SECOND', 16 * 1024 * 1024, 64 * 1024, 1024 * 1024 * 1024),
    apiKeyCacheTtlMs: int(env, 'API_KEY_CACHE_TTL_MS', 10_000, 0, 300_000),
    jobPollIntervalMs: int(env, 'JOB_POLL_INTERVAL_MS', 1000, 10, 60_000),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 300_000),
    logLevel: env.LOG_LEVEL || 'info',
    ...meta(env),
    mediaMaxBytes: int(env, 'MEDIA_MAX_BYTES', 100 * 1024 * 1024, 1, 2 * 1024 * 1024 * 1024),
    templateSyncIntervalMs: int(env, 'TEMPLATE_SYNC_INTERVAL_MS', 15 * 60 * 1000, 1000, 7 * 24 * 60 * 60 * 1000),
    sendTimeoutMs: int(env, 'SEND_TIMEOUT_MS', 10_000, 50, 120_000),
    sendMaxAttempts: int(env, 'SEND_MAX_ATTEMPTS', 5, 1, 50),
    crmAutomationIntervalMs: int(env, 'CRM_AUTOMATION_INTERVAL_MS', 60_000, 100, 86_400_000),
    knowledgeFetchTimeoutMs: int(env, 'KNOWLEDGE_FETCH_TIMEOUT_MS', 15_000, 100, 120_000),
    knowledgeFetchMaxBytes: int(env, 'KNOWLEDGE_FETCH_MAX_BYTES', 5 * 1024 * 1024, 1024, 50 * 1024 * 1024),
    lifecyclePreCheckinDays: int(env, 'LIFECYCLE_PRE_CHECKIN_DAYS', 2, 0, 60),
    crawl: {
      concurrencyPerHost: int(env, 'CRAWL_CONCURRENCY_PER_HOST', 4, 1, 64),
      fetchTimeoutMs: int(env, 'CRAWL_FETCH_TIMEOUT_MS', 15_000, 100, 120_000),
      maxPageBytes: int(env, 'CRAWL_MAX_PAGE_BYTES', 2 * 1024 * 1024, 1024, 50 * 1024 * 1024),
      maxDelayMs: int(env, 'CRAWL_MAX_DELAY_MS', 10_000, 0, 120_000),
      userAgent: env.CRAWL_USER_AGENT || 'm2m-knowledge-crawler/1.0',
      recrawlCheckMs: int(env, 'CRAWL_RECRAWL_CHECK_MS', 60_000, 100, 86_400_000),
      recrawlBatch: int(env, 'CRAWL_RECRAWL_BATCH', 10, 1, 1000),
      deadlineMs: int(env, 'CRAWL_DEADLINE_MS', 2 * 3_600_000, 1_000, 24 * 3_600_000),
    },
    metricsPort: env.METRICS_PORT ? int(env, 'METRICS_PORT', 0, 0, 65535) : undefined,
    redis: redis(env),
    embeddings: embeddings(env),
  };
}
