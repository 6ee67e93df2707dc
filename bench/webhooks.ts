/**
 * Scenario 2: webhook delivery. (a) drain: N pending deliveries written straight into the database, then a
 * worker (--role all) started on that data; time until the receiver has them all. (b) latency: events
 * emitted at a fixed rate (bench/emit.ts: by `emit()` in transactions on PostgreSQL, through the admin route
 * on PGlite), commit to receipt at the receiver.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb } from '../src/db/driver.js';
import { CpuMeter, RssSampler, fmt, log, round, rssKb, sleep, summarise, type DbKind, type RssFigures } from './lib.js';
import { pacedEmit, routeEmitter, sqlEmitter } from './emit.js';
import { call, newSchema, seedSubscription, startReceiver, startServer, stopChild, withPg, type Server } from './procs.js';

export interface WebhookPlan {
  pending: number;
  drainCapS: number;
  rate: number;
  latencyS: number;
}

export interface DrainResult {
  pending: number;
  seedSeconds: number;
  apiRssBeforeSeedMb: number | undefined;
  apiRssPendingMb: number | undefined;
  received: number;
  duplicates: number;
  complete: boolean;
  /** First to last arrival at the receiver. */
  drainSeconds: number;
  deliveriesPerSec: number;
  /** From spawning the worker to the last arrival (includes process start and migrations check). */
  wallSeconds: number;
  workerRss: RssFigures;
  /** Deliveries still pending when the drain hit its time cap, canceled so the latency phase starts on an empty queue. */
  backlogCanceled: number;
  /** PostgreSQL only: webhook_deliveries row updates (pg_stat_user_tables.n_tup_upd) per delivery during the drain. */
  rowUpdatesPerDelivery?: number;
  /** % of one core used during the drain (worker, receiver, bench, postgres, other); machine = % of all cores. */
  cpuPct: Record<string, number>;
}

export interface LatencyResult {
  targetRate: number;
  seconds: number;
  attempted: number;
  emitted: number;
  emitFailures: number;
  /** Failed emits by HTTP status or error code. */
  emitFailureReasons: Record<string, number>;
  emitsPerSec: number;
  emitP50Ms: number;
  emitP99Ms: number;
  received: number;
  missing: number;
  deliveriesPerSec: number;
  /** Receiver arrival minus the moment the emit response (sent after commit) arrived. */
  commitToReceipt: { p50Ms: number; p99Ms: number; maxMs: number };
  /** Receiver arrival minus the event's occurredAt (taken before the transaction commits). */
  occurredToReceipt: { p50Ms: number; p99Ms: number; maxMs: number };
  workerRss: RssFigures;
  /** % of one core used while emitting (server, receiver, bench, postgres, other); machine = % of all cores. */
  cpuPct: Record<string, number>;
}

export interface WebhookResult {
  db: DbKind;
  drain: DrainResult;
  latency: LatencyResult;
}

/** Inserts $4 `message.created` events of tenant $1 at $2 ($3: the same time as text), ids `evt_<prefix>_0000001`…. */
export function seedEventsSql(prefix: string): string {
  return `
  INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at)
  SELECT 'evt_${prefix}_' || lpad(i::text, 7, '0'), $1::text, 'message.created', $2::timestamptz,
         '{"eventId":"evt_${prefix}_' || lpad(i::text, 7, '0') || '","type":"message.created","schemaVersion":"1.0","tenantId":"' || $1::text
         || '","occurredAt":"' || $3::text || '","data":{"conversationId":"cnv_bench","messageId":"msg_${prefix}_' || i
         || '","text":"Hello, is the room with the sea view still free on Friday?"}}',
         $2::timestamptz
  FROM generate_series(1, $4::int) AS i`;
}

const SEED_DELIVERIES = `
  INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, next_attempt_at, created_at, updated_at)
  SELECT 'dlv_bench_' || lpad(i::text, 7, '0'), $1::text, 'evt_bench_' || lpad(i::text, 7, '0'), 'message.created', $2::text,
         'pending', $3::timestamptz, $3::timestamptz, $3::timestamptz
  FROM generate_series(1, $4::int) AS i`;

type Query = (sql: string, params?: unknown[]) => Promise<unknown>;

async function seedPending(query: Query, tenantId: string, subscriptionId: string, count: number): Promise<void> {
  const now = new Date().toISOString();
  await query(seedEventsSql('bench'), [tenantId, now, now, count]);
  await query(SEED_DELIVERIES, [tenantId, subscriptionId, now, count]);
  await query('ANALYZE webhook_events');
  await query('ANALYZE webhook_deliveries');
}

async function rowUpdates(url: string, schema: string): Promise<number> {
  return withPg(url, async (client) => {
    const result = await client.query<{ n: string }>(
      `SELECT n_tup_upd::text AS n FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'webhook_deliveries'`,
      [schema],
    );
    return Number(result.rows[0]?.n ?? 0);
  });
}

const ms = (values: number[]) => {
  const s = summarise(values);
  return { p50Ms: s.p50, p99Ms: s.p99, maxMs: s.max };
};

export async function runWebhooks(db: DbKind, postgresUrl: string | undefined, plan: WebhookPlan): Promise<WebhookResult> {
  const dataDir = db === 'pglite' ? mkdtempSync(path.join(tmpdir(), 'm2m-bench-')) : undefined;
  const schema = db === 'postgres' ? newSchema(postgresUrl!) : undefined;
  const dbEnv: Record<string, string> = db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: schema! } : { DATA_DIR: dataDir! };
  let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
  let server: Server | undefined;
  try {
    receiver = await startReceiver(`receiver-${db}`);
    log(`webhooks/${db}: starting server (--role api) to seed ${fmt(plan.pending)} pending deliveries`);
    server = await startServer(`webhooks-api-${db}`, 'api', dbEnv);
    const seeded = await seedSubscription(server.baseUrl, receiver.url);
    await sleep(300);
    const apiRssBefore = rssKb(server.pid);

    const seedStart = Date.now();
    if (db === 'postgres') {
      await withPg(postgresUrl!, async (client) => {
        await client.query(`SET search_path TO ${schema}, public`);
        await seedPending((sql, params) => client.query(sql, params), seeded.tenantId, seeded.subscriptionId, plan.pending);
      });
    } else {
      // PGlite allows one process at a time: stop the server, write through PGlite here, start it again.
      await stopChild(server.child);
      const lite = await openDb({ dataDir: dataDir! });
      try {
        await seedPending((sql, params) => lite.query(sql, params), seeded.tenantId, seeded.subscriptionId, plan.pending);
      } finally {
        await lite.close();
      }
      server = await startServer(`webhooks-api2-${db}`, 'api', dbEnv);
    }
    const seedSeconds = round((Date.now() - seedStart) / 1000, 1);
    log(`webhooks/${db}: seeded ${fmt(plan.pending)} pending deliveries in ${seedSeconds} s`);
    await sleep(1_000);
    const apiRssPending = rssKb(server.pid);
    await stopChild(server.child);
    server = undefined;

    // (a) drain
    const updatesBefore = db === 'postgres' ? await rowUpdates(postgresUrl!, schema!) : undefined;
    await receiver.reset();
    const spawnedAt = Date.now();
    log(`webhooks/${db}: starting worker (--role all) to drain`);
    server = await startServer(`webhooks-worker-${db}`, 'all', dbEnv, { JOB_POLL_INTERVAL_MS: '100' });
    const drainRss = new RssSampler(server.pid, 500);
    const drainCpu = new CpuMeter({ worker: server.pid, receiver: receiver.child.pid, bench: process.pid }, db === 'postgres');
    const deadline = spawnedAt + plan.drainCapS * 1000;
    let stats = await receiver.stats();
    let lastLog = Date.now();
    while (stats.unique < plan.pending && Date.now() < deadline && server.child.exitCode === null) {
      await sleep(250);
      stats = await receiver.stats();
      if (Date.now() - lastLog >= 10_000) {
        lastLog = Date.now();
        log(`  drain: ${fmt(stats.unique)} / ${fmt(plan.pending)} received`);
      }
    }
    const workerRssDrain = drainRss.stop();
    const drainCpuPct = drainCpu.stop();
    const drainSeconds = Math.max(0.001, (stats.last - stats.first) / 1000);
    const drain: DrainResult = {
      pending: plan.pending,
      seedSeconds,
      apiRssBeforeSeedMb: apiRssBefore === undefined ? undefined : round(apiRssBefore / 1024, 1),
      apiRssPendingMb: apiRssPending === undefined ? undefined : round(apiRssPending / 1024, 1),
      received: stats.unique,
      duplicates: stats.duplicates,
      complete: stats.unique >= plan.pending,
      drainSeconds: round(drainSeconds, 2),
      deliveriesPerSec: round(stats.unique / drainSeconds),
      wallSeconds: round(((stats.last || Date.now()) - spawnedAt) / 1000, 2),
      workerRss: workerRssDrain,
      cpuPct: drainCpuPct,
      backlogCanceled: 0,
    };
    log(`  drain: ${fmt(drain.received)} in ${drain.drainSeconds} s → ${fmt(drain.deliveriesPerSec)}/s${drain.complete ? '' : ' (INCOMPLETE: cap reached)'}`);
    if (server.child.exitCode !== null) throw new Error(`worker exited (${server.child.exitCode}) during the drain; see ${server.logFile}`);

    if (!drain.complete) {
      // Disabling a subscription cancels its pending deliveries; enabling it again replays nothing.
      const subscription = `/m2m/v1/webhooks/${seeded.subscriptionId}`;
      await call(server.baseUrl, 'PATCH', subscription, { token: seeded.key, body: { active: false } });
      await call(server.baseUrl, 'PATCH', subscription, { token: seeded.key, body: { active: true } });
      drain.backlogCanceled = plan.pending - drain.received;
      log(`  drain: canceled the remaining backlog (~${fmt(drain.backlogCanceled)}) so the latency phase starts on an empty queue`);
    }

    // (b) latency at a fixed rate, queue empty
    await sleep(1_500);
    if (updatesBefore !== undefined) {
      // Statistics reach pg_stat_user_tables within about a second of each transaction: approximate.
      const updates = (await rowUpdates(postgresUrl!, schema!)) - updatesBefore;
      drain.rowUpdatesPerDelivery = round(updates / Math.max(1, drain.received), 1);
      log(`  drain: ${fmt(updates)} webhook_deliveries row updates ≈ ${drain.rowUpdatesPerDelivery} per delivery`);
    }
    await receiver.reset();
    log(`webhooks/${db}: emitting ${fmt(plan.rate)} events/s for ${plan.latencyS} s`);
    const latencyRss = new RssSampler(server.pid, 500);
    const latencyCpu = new CpuMeter({ server: server.pid, receiver: receiver.child.pid, bench: process.pid }, db === 'postgres');
    const emitter = db === 'postgres' ? await sqlEmitter(postgresUrl!, schema!, seeded.tenantId) : routeEmitter(server.baseUrl, seeded.tenantId);
    const emitted = await pacedEmit(emitter, plan.rate, plan.latencyS);
    // Wait (at most 30 s) until every emitted event has arrived; stray deliveries from before do not count.
    const waitUntil = Date.now() + 30_000;
    let arrivals = await receiver.arrivals();
    while (emitted.records.some((r) => !arrivals[r.eventId]) && Date.now() < waitUntil) {
      await sleep(250);
      arrivals = await receiver.arrivals();
    }
    stats = await receiver.stats();
    const workerRssLatency = latencyRss.stop();
    const latencyCpuPct = latencyCpu.stop();
    const commit: number[] = [];
    const occurred: number[] = [];
    for (const record of emitted.records) {
      const arrival = arrivals[record.eventId];
      if (!arrival) continue;
      commit.push(arrival[0] - record.doneAt);
      if (arrival[1] !== null) occurred.push(arrival[0] - arrival[1]);
    }
    const emits = summarise(emitted.records.map((r) => r.doneAt - r.sentAt));
    const lastDone = emitted.records.reduce((max, r) => Math.max(max, r.doneAt), emitted.start + 1);
    const latency: LatencyResult = {
      targetRate: plan.rate,
      seconds: plan.latencyS,
      attempted: emitted.attempted,
      emitted: emitted.records.length,
      emitFailures: emitted.failures,
      emitFailureReasons: emitted.failureReasons,
      emitsPerSec: round(emitted.records.length / ((lastDone - emitted.start) / 1000)),
      emitP50Ms: emits.p50,
      emitP99Ms: emits.p99,
      received: commit.length,
      missing: emitted.records.length - commit.length,
      deliveriesPerSec: round(stats.unique / Math.max(0.001, ((stats.last || Date.now()) - emitted.start) / 1000)),
      commitToReceipt: ms(commit),
      occurredToReceipt: ms(occurred),
      workerRss: workerRssLatency,
      cpuPct: latencyCpuPct,
    };
    log(
      `  latency: ${fmt(latency.emitsPerSec)} emits/s, commit→receipt p50 ${latency.commitToReceipt.p50Ms} ms p99 ${latency.commitToReceipt.p99Ms} ms, missing ${latency.missing}`,
    );
    return { db, drain, latency };
  } finally {
    await stopChild(server?.child);
    await stopChild(receiver?.child);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}
