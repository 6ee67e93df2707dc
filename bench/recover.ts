/**
 * Scenario `recover` (PostgreSQL): `POST /webhooks/{id}/recover` over 100,000 failed deliveries while the
 * deliveries of other subscriptions keep flowing.
 * One server with its workers (`--role all`). The recovered subscription points at one receiver (127.0.0.2),
 * four other tenants' subscriptions at another (127.0.0.1): two destination hosts, as two customers' endpoints
 * are. 100,000 failed deliveries (and their events, an hour old) of the recovered subscription are written
 * straight into the database. The other tenants' events are committed by `emit()` at a fixed rate from the
 * bench process throughout: first alone (baseline), then while the recover call runs, then while the
 * 100,000 restarted deliveries are sent. Printed: the recover call's time, the redelivery's time and rate, and
 * the other subscriptions' commit→receipt latency in each of the three windows.
 */
import os from 'node:os';
import { CpuMeter, fmt, log, printTable, round, sleep, summarise } from './lib.js';
import { pacedEmit, sqlEmitter } from './emit.js';
import { call, newSchema, startReceiver, startServer, stopChild, withPg, type Server } from './procs.js';
import { seedEventsSql } from './webhooks.js';

const FAILED = 100_000;
const OTHER_TENANTS = 4;
const RATE = 200;
const BASELINE_SECONDS = 5;
/** The emit loop's bound once the recover starts; it stops earlier, when the recovered receiver has all. */
const CAP_SECONDS = 240;

export interface LatencyWindow {
  emitted: number;
  received: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface RecoverResult {
  failed: number;
  seedSeconds: number;
  otherSubscriptions: number;
  rate: number;
  recovered: number;
  /** The recover call, request to 202. */
  recoverSeconds: number;
  /** From the 202 to the recovered receiver having every restarted delivery (or the cap). */
  redelivery: { received: number; seconds: number; perSec: number; complete: boolean };
  others: { baseline: LatencyWindow; duringRecover: LatencyWindow; duringRedelivery: LatencyWindow; missing: number };
  /** % of one core during the recover call and during the redelivery; load average (1 min) at their ends. */
  cpuPct: { recover: Record<string, number>; redelivery: Record<string, number> };
  loadAverage: { before: number; afterRecover: number; afterRedelivery: number };
}

/** Failed after a full cycle (seven attempts), as an endpoint that was down for a while leaves them. */
const SEED_FAILED = `
  INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, attempts, cycle_attempts,
                                  http_status, failure_code, completed_at, created_at, updated_at)
  SELECT 'dlv_rec_' || lpad(i::text, 7, '0'), $1::text, 'evt_rec_' || lpad(i::text, 7, '0'), 'message.created', $2::text,
         'failed', 7, 7, 503, 'http_status', $3::timestamptz + interval '30 minutes', $3::timestamptz, $3::timestamptz + interval '30 minutes'
  FROM generate_series(1, $4::int) AS i`;

async function subscriber(base: string, name: string, url: string) {
  const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name } });
  const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, {
    body: { name: 'bench', scopes: ['webhooks:write', 'conversations:read'] },
  });
  const { subscriptionId } = await call<{ subscriptionId: string }>(base, 'POST', '/m2m/v1/webhooks', {
    token: key,
    body: { url, events: ['message.created'], description: 'bench' },
  });
  return { tenantId, key, subscriptionId };
}

const round1 = (ms: number) => round(ms, 1);

function window(lags: number[], emitted: number): LatencyWindow {
  const s = summarise(lags);
  return { emitted, received: lags.length, p50Ms: round1(s.p50), p99Ms: round1(s.p99), maxMs: round1(s.max) };
}

export async function runRecover(postgresUrl: string): Promise<RecoverResult> {
  const schema = newSchema(postgresUrl);
  let server: Server | undefined;
  let recoveredReceiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
  let othersReceiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
  try {
    recoveredReceiver = await startReceiver('recover-receiver-recovered', '127.0.0.2');
    othersReceiver = await startReceiver('recover-receiver-others', '127.0.0.1');
    server = await startServer('recover', 'all', { DATABASE_URL: postgresUrl, DATABASE_SCHEMA: schema }, { JOB_POLL_INTERVAL_MS: '100' });
    const base = server.baseUrl;
    const recovered = await subscriber(base, 'Recovered Hotel', recoveredReceiver.url);
    const others = [];
    for (let i = 0; i < OTHER_TENANTS; i += 1) others.push(await subscriber(base, `Other Hotel ${i + 1}`, othersReceiver.url));

    log(`recover: seeding ${fmt(FAILED)} failed deliveries`);
    const seedStart = Date.now();
    const occurred = new Date(Date.now() - 60 * 60 * 1000);
    await withPg(postgresUrl, async (client) => {
      await client.query(`SET search_path TO ${schema}, public`);
      await client.query(seedEventsSql('rec'), [recovered.tenantId, occurred, occurred.toISOString(), FAILED]);
      await client.query(SEED_FAILED, [recovered.tenantId, recovered.subscriptionId, occurred, FAILED]);
      await client.query('VACUUM ANALYZE webhook_events');
      await client.query('VACUUM ANALYZE webhook_deliveries');
    });
    const seedSeconds = round((Date.now() - seedStart) / 1000, 1);
    log(`recover: seeded in ${seedSeconds} s; ${OTHER_TENANTS} other subscriptions get ${RATE} events/s, ${BASELINE_SECONDS} s alone first`);

    const loadBefore = round(os.loadavg()[0], 2);
    const emitter = await sqlEmitter(postgresUrl, schema, others.map((o) => o.tenantId));
    let emitting = true;
    const emitStart = Date.now();
    const emitted = pacedEmit(emitter, RATE, BASELINE_SECONDS + CAP_SECONDS, () => !emitting);
    await sleep(BASELINE_SECONDS * 1000);

    const pids = { server: server.pid, receiver: recoveredReceiver.child.pid, receiver2: othersReceiver.child.pid, bench: process.pid };
    let cpu = new CpuMeter(pids, true);
    const recoverStart = Date.now();
    const response = await fetch(`${base}/m2m/v1/webhooks/${recovered.subscriptionId}/recover`, {
      method: 'POST',
      headers: { authorization: `Bearer ${recovered.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ since: new Date(occurred.getTime() - 60_000).toISOString() }),
      signal: AbortSignal.timeout(CAP_SECONDS * 1000),
    });
    const text = await response.text();
    const recoverEnd = Date.now();
    if (response.status !== 202) throw new Error(`recover answered ${response.status}: ${text.slice(0, 300)}`);
    const { recovered: count } = JSON.parse(text) as { recovered: number };
    const recoverCpu = cpu.stop();
    const loadAfterRecover = round(os.loadavg()[0], 2);
    log(`recover: ${fmt(count)} restarted in ${fmt((recoverEnd - recoverStart) / 1000, 2)} s; waiting for the receiver to get them`);

    cpu = new CpuMeter(pids, true);
    const deadline = recoverStart + CAP_SECONDS * 1000;
    let stats = await recoveredReceiver.stats();
    let lastLog = Date.now();
    while (stats.unique < count && Date.now() < deadline) {
      await sleep(250);
      stats = await recoveredReceiver.stats();
      if (Date.now() - lastLog >= 10_000) {
        lastLog = Date.now();
        log(`  recover: ${fmt(stats.unique)} / ${fmt(count)} redelivered`);
      }
    }
    const redeliveryEnd = stats.unique >= count ? stats.last : Date.now();
    const redeliveryCpu = cpu.stop();
    const loadAfterRedelivery = round(os.loadavg()[0], 2);
    emitting = false;
    const { records } = await emitted;

    // Every other event should arrive; wait at most 30 s for the last ones.
    const waitUntil = Date.now() + 30_000;
    let arrivals = await othersReceiver.arrivals();
    while (records.some((r) => !arrivals[r.eventId]) && Date.now() < waitUntil) {
      await sleep(250);
      arrivals = await othersReceiver.arrivals();
    }
    const windows = { baseline: [] as number[], duringRecover: [] as number[], duringRedelivery: [] as number[] };
    const counts = { baseline: 0, duringRecover: 0, duringRedelivery: 0 };
    let missing = 0;
    for (const record of records) {
      const which = record.doneAt < recoverStart ? 'baseline' : record.doneAt < recoverEnd ? 'duringRecover' : record.doneAt < redeliveryEnd ? 'duringRedelivery' : undefined;
      if (!which) continue;
      counts[which] += 1;
      const arrival = arrivals[record.eventId];
      if (!arrival) missing += 1;
      else windows[which].push(arrival[0] - record.doneAt);
    }
    const redeliverySeconds = Math.max(0.001, (redeliveryEnd - recoverEnd) / 1000);
    const result: RecoverResult = {
      failed: FAILED,
      seedSeconds,
      otherSubscriptions: OTHER_TENANTS,
      rate: RATE,
      recovered: count,
      recoverSeconds: round((recoverEnd - recoverStart) / 1000, 2),
      redelivery: { received: stats.unique, seconds: round(redeliverySeconds, 1), perSec: round(stats.unique / redeliverySeconds), complete: stats.unique >= count },
      others: {
        baseline: window(windows.baseline, counts.baseline),
        duringRecover: window(windows.duringRecover, counts.duringRecover),
        duringRedelivery: window(windows.duringRedelivery, counts.duringRedelivery),
        missing,
      },
      cpuPct: { recover: recoverCpu, redelivery: redeliveryCpu },
      loadAverage: { before: loadBefore, afterRecover: loadAfterRecover, afterRedelivery: loadAfterRedelivery },
    };
    log(
      `recover: others p99 ${result.others.baseline.p99Ms} ms alone, ${result.others.duringRecover.p99Ms} ms during the recover, ${result.others.duringRedelivery.p99Ms} ms during the redelivery; ${missing} missing (emits from ${new Date(emitStart).toISOString().slice(11, 19)})`,
    );
    return result;
  } finally {
    await stopChild(server?.child);
    await stopChild(recoveredReceiver?.child);
    await stopChild(othersReceiver?.child);
  }
}

export function printRecover(result: RecoverResult | undefined): void {
  if (!result) return;
  const o = result.others;
  const lat = (w: LatencyWindow) => `p50 ${w.p50Ms} ms, p99 ${w.p99Ms} ms, max ${w.maxMs} ms (${fmt(w.received)} of ${fmt(w.emitted)})`;
  const cpu = (x: Record<string, number>) => `${fmt(x.server)} / ${fmt((x.receiver ?? 0) + (x.receiver2 ?? 0))} / ${fmt(x.bench)} / ${fmt(x.postgres)} / ${fmt(x.other)}`;
  printTable(`Scenario 10 — recover ${fmt(result.failed)} failed deliveries while ${result.otherSubscriptions} other subscriptions get ${fmt(result.rate)} events/s (PostgreSQL)`, ['', 'figure', 'CPU % server / receivers / bench / pg / other', 'load avg'], [
    ['POST /webhooks/{id}/recover', `${fmt(result.recovered)} restarted in ${fmt(result.recoverSeconds, 2)} s`, cpu(result.cpuPct.recover), fmt(result.loadAverage.afterRecover, 2)],
    ['redelivery to the recovered endpoint', `${fmt(result.redelivery.received)} in ${fmt(result.redelivery.seconds, 1)} s (${fmt(result.redelivery.perSec)}/s)${result.redelivery.complete ? '' : ' INCOMPLETE'}`, cpu(result.cpuPct.redelivery), fmt(result.loadAverage.afterRedelivery, 2)],
    ['other subscriptions, commit→receipt, alone', lat(o.baseline), '', fmt(result.loadAverage.before, 2)],
    ['… during the recover call', lat(o.duringRecover), '', ''],
    ['… during the redelivery', `${lat(o.duringRedelivery)}; ${o.missing} missing`, '', ''],
  ]);
}
