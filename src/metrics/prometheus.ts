import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../clock.js';
import type { Db, PoolUse } from '../db/driver.js';
import type { WorkCounters } from './counters.js';
import { deliveryLag, dueJobsByTask, type QueueRow } from './repo.js';

const POOL_FIELDS = ['total', 'idle', 'waiting', 'max'] as const;

/** `load` shared by the callers that ask while it runs (the gauges of one scrape). */
function shared<T>(load: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => {
    inFlight ??= load().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };
}

/**
 * The process's Prometheus metrics (METRICS_PORT): its own registry, so that several runtimes in one
 * process (the tests) never register a metric twice. Queue and lag gauges are read from the database at
 * scrape time, so every node reports the same shared queues; counters count this process's work.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly counters: WorkCounters;
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  private poolGauges: Record<keyof PoolUse, Gauge> | undefined;

  constructor(
    private readonly db: Db,
    clock: Clock,
  ) {
    const registry = this.registry;
    collectDefaultMetrics({ register: registry });
    this.httpDuration = new Histogram({
      name: 'm2m_http_request_duration_seconds',
      help: 'HTTP requests by method, route template and status, with their latency',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    const webhookAttempts = new Counter({
      name: 'm2m_webhook_attempts_total',
      help: 'Webhook delivery attempts made by this process, by outcome (delivered, retrying, failed = gave up)',
      labelNames: ['outcome'],
      registers: [registry],
    });
    const sends = new Counter({
      name: 'm2m_message_sends_total',
      help: 'Outbound message send jobs finished by this process, by outcome (sent, retrying, failed)',
      labelNames: ['outcome'],
      registers: [registry],
    });
    const crawlPages = new Counter({
      name: 'm2m_crawl_pages_total',
      help: 'Pages of finished website crawls run by this process, by result (processed, failed)',
      labelNames: ['result'],
      registers: [registry],
    });
    const callbackItems = new Counter({
      name: 'm2m_provider_callback_items_total',
      help: 'Items of provider callbacks processed by this process, by provider and outcome (applied, duplicate, unknown_channel, skipped)',
      labelNames: ['provider', 'outcome'],
      registers: [registry],
    });
    this.counters = {
      webhookAttempt: (outcome) => webhookAttempts.inc({ outcome }),
      callbackItems: (provider, outcome, count) => callbackItems.inc({ provider, outcome }, count),
      sendOutcome: (outcome) => sends.inc({ outcome }),
      crawlPages: (result, count) => crawlPages.inc({ result }, count),
    };

    // Gauges that come from one query share it: the registry collects them concurrently, so one in-flight
    // query serves both.
    const dueJobs = shared(() => dueJobsByTask(db, clock.now()));
    const perTask = (name: string, help: string, value: (row: QueueRow) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['task'],
        registers: [registry],
        async collect() {
          const rows = await dueJobs();
          this.reset();
          for (const row of rows) this.set({ task: row.task }, value(row));
        },
      });
    perTask('m2m_job_queue_depth', 'Jobs due and waiting for a worker, by task', (row) => row.depth);
    perTask('m2m_job_queue_oldest_age_seconds', 'How long the oldest due job of each task has waited', (row) => row.oldest_seconds);
    const lag = shared(() => deliveryLag(db, clock.now()));
    new Gauge({
      name: 'm2m_webhook_deliveries_due',
      help: 'Webhook deliveries due now and not yet attempted',
      registers: [registry],
      async collect() {
        this.set((await lag()).due);
      },
    });
    new Gauge({
      name: 'm2m_webhook_delivery_lag_seconds',
      help: 'How late the most overdue webhook delivery is (0 when none is due)',
      registers: [registry],
      async collect() {
        this.set((await lag()).lag_seconds);
      },
    });
    // Set by scrape() before this scrape's own queries take or wait for connections. PGlite has one connection
    // and no pool: the gauges are not exported there.
    const pool = (name: string, help: string) => new Gauge({ name, help, registers: [registry] });
    if (db.poolUse() !== undefined) {
      this.poolGauges = {
        total: pool('m2m_db_pool_connections', 'Open connections of the database pool'),
        idle: pool('m2m_db_pool_idle_connections', 'Idle connections of the database pool'),
        waiting: pool('m2m_db_pool_waiting_queries', 'Queries waiting for a database connection'),
        max: pool('m2m_db_pool_max_connections', 'Size limit of the database pool'),
      };
    }
  }

  /** The Prometheus text of one scrape. */
  async scrape(): Promise<string> {
    const use = this.db.poolUse();
    if (use && this.poolGauges) for (const field of POOL_FIELDS) this.poolGauges[field].set(use[field]);
    return this.registry.metrics();
  }

  /** Records every answered request under its route template (the raw URL would explode the label set). */
  instrument(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? 'unmatched';
      this.httpDuration.observe({ method: request.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
      done();
    });
  }
}
