import { createRequire } from 'node:module';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type PinoPretty from 'pino-pretty';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { openDatabase, type OpenedDatabase } from './db/open.js';
import { buildApp, type App } from './app.js';
import { JobRunner } from './jobs/runner.js';
import { registerMaintenance } from './jobs/maintenance.js';
import { purgeExpiredIdempotencyKeys } from './platform/idempotency.js';
import type { JobWorker } from './jobs/worker.js';
import { loadKeyring } from './secrets.js';
import { createServices, type Services } from './services.js';
import { WebhookDispatcher } from './webhooks/deliver.js';
import { SEND_SLOTS, registerSendPipeline } from './messaging/pipeline.js';
import { SEND_TASK } from './messaging/outbound.js';
import { registerReceipts } from './messaging/receipts.js';
import { registerAutomation } from './crm/automation.js';
import { registerPreCheckin } from './reservations/schedule.js';
import { WebchatProvider } from './channels/webchat/provider.js';
import { SandboxProvider } from './messaging/providers/sandbox.js';
import type { ProviderRegistry } from './messaging/providers/registry.js';
import { WhatsAppCloudProvider } from './channels/providers/meta/whatsapp.js';
import { MessengerSendApiProvider } from './channels/providers/meta/messenger.js';
import { registerContactProfiles } from './channels/contact-profile.js';
import { LazyGuardedAgent } from './net/undici.js';
import { GraphClient } from './channels/providers/meta/graph-client.js';
import { providerConnection } from './channels/connection.js';
import { registerCallbackProcessing } from './channels/callbacks.js';
import { CALLBACK_RETENTION_MS, callbackRepo } from './channels/callback-repo.js';
import { adoptLegacyChannels } from './channels/legacy.js';
import { registerTemplateSync } from './channels/template-sync.js';
import { registerMediaDownload } from './channels/media-download.js';
import type { ChannelRow } from './channels/repo.js';
import type { Resolver } from './net/guard.js';
import { registerKnowledgeJobs } from './knowledge/jobs.js';
import { createEmbedder } from './knowledge/crawler/worker.js';
import { GuardedFetcher } from './knowledge/fetch.js';
import { createCrawlWorker } from './knowledge/crawler/worker.js';
import { RateLimiter, type KeyRateLimit } from './http/rate-limit.js';
import { noWorkCounters } from './metrics/counters.js';
import type { Metrics } from './metrics/prometheus.js';
import { startMetricsServer } from './metrics/server.js';

export interface Runtime {
  services: Services;
  app: App;
  runner: JobRunner;
  dispatcher: WebhookDispatcher;
  /** The port `GET /metrics` is served on (METRICS_PORT set), else undefined. */
  metricsPort: number | undefined;
  startWorkers(): Promise<void>;
  /** Graceful stop: no new requests or claims, running work finishes or releases its lease, pool closed. */
  close(graceMs?: number): Promise<void>;
  /** The parts `close` is waiting on (for the log of a shutdown that does not finish). */
  readonly closing: readonly string[];
}

/** Where logs go: a terminal gets readable lines, anything else (a file, a pipe, a log collector) JSON lines. */
export type LogOutput = DestinationStream & { isTTY?: boolean };

/** `output` defaults to stdout (through pino's own fast destination when it is not a terminal). */
export function createLogger(level: string, output?: LogOutput): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: 'm2m-api' },
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.secret', '*.key', '*.apiKey', 'secret', 'key'],
      censor: '[redacted]',
    },
  };
  const terminal = output ? output.isTTY === true : process.stdout.isTTY;
  if (!terminal) return output ? pino(options, output) : pino(options);
  // Loaded only for a terminal (a server's stdout is a pipe); redaction happens before the line is formatted,
  // so the pretty form hides the same fields.
  const pretty: typeof PinoPretty = createRequire(import.meta.url)('pino-pretty');
  const lines = pretty({ destination: output ?? process.stdout, sync: true, colorize: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' });
  return pino(options, lines);
}

async function sharedRateLimit(redis: NonNullable<Config['redis']>, config: Config, log: Logger): Promise<KeyRateLimit> {
  // ioredis is loaded only where REDIS_URL is set.
  const { SharedRateLimit } = await import('./http/shared-rate-limit.js');
  const limiter = new SharedRateLimit({ ...redis, ratePerSecond: config.rateLimitRps, burst: config.rateLimitBurst, log: log.child({ component: 'rate-limit' }) });
  if (!(await limiter.connected())) log.warn('Redis (REDIS_URL) is not reachable yet: rate limiting per process until it is');
  return limiter;
}

/** Opens the database, migrates, and builds services, the HTTP app and the workers (not yet started). */
export interface RuntimeOptions {
  clock?: Clock;
  logger?: Logger;
  resolver?: Resolver;
  /** The database, already being opened and migrated (main.ts starts this while the rest of the code loads). */
  database?: Promise<OpenedDatabase>;
}

export async function createRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  const log = options.logger ?? createLogger(config.logLevel);
  const clock = options.clock ?? systemClock;
  const { db, applied } = await (options.database ?? openDatabase(config));
  if (applied.length > 0) log.info({ migrations: applied }, 'migrations applied');
  const keyring = await loadKeyring(db, config.secretKey);
  if (!keyring.fromConfig) log.warn('SECRET_KEY is not set: using a generated key kept in the database; set SECRET_KEY in production');
  if (config.allowPrivateDestinations) {
    log.warn('UNSAFE_ALLOW_PRIVATE_DESTINATIONS is on: webhooks and the crawler may reach private and loopback addresses. Never use this in production.');
  }
  const services = createServices({ config, db, clock, keyring, log, resolver: options.resolver });
  // prom-client is loaded only where metrics are asked for.
  const metrics: Metrics | undefined = config.metricsPort !== undefined ? new (await import('./metrics/prometheus.js')).Metrics(db, clock) : undefined;
  const counters = metrics?.counters ?? noWorkCounters;
  const limiter = config.redis ? await sharedRateLimit(config.redis, config, log) : new RateLimiter(config.rateLimitRps, config.rateLimitBurst);
  const app = await buildApp(services, log, { limiter, metrics });
  await services.apiKeys.start();
  const runner = new JobRunner(db, clock, log.child({ component: 'jobs' }), { pollIntervalMs: config.jobPollIntervalMs, lanes: { [SEND_TASK]: SEND_SLOTS } });
  if (config.deprecatedVariables.length > 0) {
    log.warn({ variables: config.deprecatedVariables }, 'deprecated variables: WHATSAPP_* are read as fallbacks of META_*; CHANNEL_PROVIDER is ignored (each channel has its provider)');
  }
  const adopted = await adoptLegacyChannels(db, config.legacyChannelProvider);
  if (adopted > 0) log.warn({ channels: adopted }, 'CHANNEL_PROVIDER=whatsapp: WhatsApp channels of the earlier release are now whatsapp_cloud channels; set their wabaId with PATCH and remove CHANNEL_PROVIDER');
  const graph = new GraphClient({ baseUrl: config.meta.graphBaseUrl, apiVersion: config.meta.graphApiVersion, timeoutMs: config.sendTimeoutMs });
  const whatsapp = new WhatsAppCloudProvider(graph);
  const messenger = new MessengerSendApiProvider('messenger', graph);
  const instagram = new MessengerSendApiProvider('instagram', graph);
  const providers: ProviderRegistry = { sandbox: new SandboxProvider(), whatsapp_cloud: whatsapp, messenger, instagram, webchat: new WebchatProvider(db, clock) };
  // Messenger/Instagram attachment URLs come inside callbacks: fetched through the SSRF guard like any URL we are handed.
  const attachmentAgent = new LazyGuardedAgent(
    { allowPrivate: config.allowPrivateDestinations, timeoutMs: config.sendTimeoutMs, resolver: options.resolver },
    { headersTimeout: config.sendTimeoutMs, bodyTimeout: config.sendTimeoutMs, connections: 8 },
  );
  const openChannel = (row: Pick<ChannelRow, 'provider' | 'connection' | 'connection_secret'>) => providerConnection(row, keyring.encryptionKey, config.meta.systemUserToken);
  const knowledgeFetcher = new GuardedFetcher({
    allowPrivate: config.allowPrivateDestinations,
    timeoutMs: config.knowledgeFetchTimeoutMs,
    maxBytes: config.knowledgeFetchMaxBytes,
    resolver: options.resolver,
  });
  // Each domain registers its job handlers and says what to schedule at start and release at close.
  const workers: JobWorker[] = [
    registerMaintenance(runner, {
      db,
      // Webhook delivery metadata 30 days after completion, events after 30 days, stored idempotent responses
      // after 24 hours, processed provider callbacks after 7 days. After the deliveries: an event is kept while a delivery still refers to it.
      purges: [
        { name: 'deliveries', run: () => services.webhooks.purgeExpired() },
        { name: 'events', run: () => services.events.purgeExpired() },
        { name: 'idempotencyKeys', run: (now) => purgeExpiredIdempotencyKeys(db, now) },
        { name: 'providerCallbacks', run: (now) => callbackRepo.purgeProcessed(db, new Date(now.getTime() - CALLBACK_RETENTION_MS)) },
        { name: 'webchat', run: () => services.webchat.purgeExpired() },
      ],
    }),
    registerSendPipeline(runner, {
      db,
      providers,
      blobs: services.blobs,
      openConnection: (row) => openChannel({ provider: row.channel_provider, connection: row.connection, connection_secret: row.connection_secret }),
      counters,
    }),
    registerReceipts(runner, { db, providers, openConnection: openChannel }),
    registerTemplateSync(runner, { db, whatsapp, openConnection: openChannel, intervalMs: config.templateSyncIntervalMs }),
    registerMediaDownload(runner, {
      db,
      blobs: services.blobs,
      whatsapp,
      downloadUrl: async (url, download) => graph.download(url, { ...download, dispatcher: await attachmentAgent.get() }),
      openConnection: openChannel,
      maxBytes: config.mediaMaxBytes,
    }),
    registerContactProfiles(runner, { db, messenger, instagram, openConnection: openChannel }),
    registerCallbackProcessing(runner, { db, log: log.child({ component: 'provider-callbacks' }), counters }),
    registerAutomation(runner, { db, sender: services.followUpSender, intervalMs: config.crmAutomationIntervalMs }),
    registerPreCheckin(runner, { db, reservations: services.reservations }),
    registerKnowledgeJobs(runner, { db, blobs: services.blobs, fetcher: knowledgeFetcher, embedder: createEmbedder(config) }),
    createCrawlWorker(runner, db, config, options.resolver, counters),
  ];
  const dispatcher = new WebhookDispatcher(db, clock, log.child({ component: 'webhooks' }), {
    retryDelaysMs: config.webhookRetryDelaysMs,
    attemptTimeoutMs: config.webhookAttemptTimeoutMs,
    allowPrivateDestinations: config.allowPrivateDestinations,
    maxInFlight: config.webhookMaxInFlight,
    maxInFlightPerHost: config.webhookMaxInFlightPerHost,
    autoDisableAfterMs: config.webhookAutoDisableAfterMs,
    pollIntervalMs: config.jobPollIntervalMs,
    resolver: options.resolver,
    decryptSecret: (sealed) => services.webhooks.decryptSecret(sealed),
    counters,
  });
  const metricsServer = metrics && config.metricsPort !== undefined ? await startMetricsServer(metrics, config.host, config.metricsPort, log) : undefined;
  let workersStarted = false;
  const closing = new Set<string>();
  const closeStep = async (name: string, work: () => unknown) => {
    closing.add(name);
    await work();
    closing.delete(name);
  };
  return {
    services,
    app,
    runner,
    dispatcher,
    metricsPort: metricsServer?.port,
    async startWorkers() {
      workersStarted = true;
      for (const worker of workers) await worker.schedule?.(db, clock);
      await runner.start();
      await dispatcher.start();
    },
    get closing() {
      return [...closing];
    },
    async close(graceMs = 10_000) {
      await closeStep('http server', () => app.close());
      await closeStep('metrics server', () => metricsServer?.close());
      await closeStep('rate limiter', () => limiter.close());
      services.apiKeys.stop();
      if (workersStarted) {
        await Promise.all([closeStep('job runner', () => runner.stop(graceMs)), closeStep('webhook dispatcher', () => dispatcher.stop(graceMs))]);
      }
      await closeStep('job workers', () => Promise.all(workers.map((worker) => worker.close?.())));
      await closeStep('blob store', () => services.blobs.close?.());
      await closeStep('attachment agent', () => attachmentAgent.close());
      await closeStep('database', () => db.close());
    },
  };
}
