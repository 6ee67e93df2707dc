/**
 * Scenario 6: abuse. The real server (`--role api`) takes normal traffic (64 connections on the deliveries
 * list) first alone ("quiet"), then while 10 clients send 10 MB bodies over and over, 500 connections sit
 * idle, and 20 connections trickle a body one byte at a time (those clients run in a process of their own,
 * bench/abuser.ts). A prober, in a process of its own too (bench/prober.ts), measures /healthz on its own
 * connection throughout. Afterwards the server's RSS is sampled for 10 s. Targets: /healthz p99 < 50 ms, list
 * p99 under abuse ≤ 2× quiet, RSS 10 s after back within 20% of its start (at most 20% above it: less is memory
 * given back, not kept).
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { CpuMeter, RssSampler, fmt, freePort, log, printTable, round, sleep, type DbKind } from './lib.js';
import { BIG_BODY_CLIENTS, IDLE_CONNECTIONS, SLOW_CONNECTIONS, type AbuseStats } from './abuser.js';
import type { ProbeStats } from './prober.js';
import { call, emitBody, newSchema, seedSubscription, startServer, stopChild, trackChild, type Server } from './procs.js';

export interface AbuseLoad {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

export interface AbuseResult {
  db: DbKind;
  quiet: { list: AbuseLoad; healthzP99Ms: number; healthzMaxMs: number };
  abuse: {
    list: AbuseLoad;
    healthzP99Ms: number;
    healthzMaxMs: number;
    healthzFailures: number;
    bigBodies: { sent: number; answers: Record<string, number> };
    idleOpen: number;
    idleClosedByServer: number;
    slowClosedByServer: number;
    cpuPct: Record<string, number>;
  };
  listP99Ratio: number;
  rss: { startMb: number; maxMb: number; after10sMb: number; recoveredPct: number };
}

const LIST_CONNECTIONS = 64;

async function cannon(url: string, seconds: number, headers: Record<string, string>): Promise<AbuseLoad> {
  const instance = autocannon({ url, connections: LIST_CONNECTIONS, duration: seconds, headers, timeout: 10 });
  const guard = setTimeout(() => instance.stop(), (seconds + 20) * 1000);
  const result = await instance;
  clearTimeout(guard);
  return { rps: round(result.requests.total / result.duration), p50Ms: result.latency.p50, p99Ms: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

/**
 * A bench client in a child process of its own (bench/abuser.ts, bench/prober.ts): resolves once it has started;
 * `stop` asks it to end and resolves with what it sends back.
 */
function forkClient<T>(script: string, args: string[], what: string): Promise<{ pid: number | undefined; stop: () => Promise<T> }> {
  const child = fork(fileURLToPath(new URL(script, import.meta.url)), args, { execArgv: ['--import', 'tsx'] });
  trackChild(child);
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`${what} exited (${code})`))));
  const started = new Promise<void>((resolve) => child.once('message', () => resolve()));
  return Promise.race([started, exited]).then(() => ({
    pid: child.pid,
    stop: () => {
      const stats = new Promise<T>((resolve) => child.once('message', (message) => resolve(message as T)));
      child.send('stop');
      return Promise.race([stats, exited]);
    },
  }));
}

const startAbuser = (port: number, key: string) => forkClient<AbuseStats>('./abuser.ts', [String(port), key], 'the abuse clients');
const startProber = (baseUrl: string) => forkClient<ProbeStats>('./prober.ts', [baseUrl], 'the /healthz prober');

export async function runAbuse(db: DbKind, postgresUrl: string | undefined, timing: { warmupS: number; measureS: number }): Promise<AbuseResult> {
  const dbEnv: Record<string, string> = db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: newSchema(postgresUrl!) } : { DATA_DIR: 'memory://' };
  let server: Server | undefined;
  try {
    log(`abuse/${db}: starting server (--role api)`);
    server = await startServer(`abuse-${db}`, 'api', dbEnv, {}, { compiled: true });
    const port = Number(new URL(server.baseUrl).port);
    const seeded = await seedSubscription(server.baseUrl, `http://127.0.0.1:${await freePort()}/hook`);
    const { key: uploadKey } = await call<{ key: string }>(server.baseUrl, 'POST', `/admin/v1/tenants/${seeded.tenantId}/api-keys`, { body: { name: 'abuse', scopes: ['knowledge:write', 'webhooks:write'] } });
    for (let i = 0; i < 50; i += 1) await call(server.baseUrl, 'POST', `/admin/v1/tenants/${seeded.tenantId}/webhook-events`, { body: emitBody(i) });
    const listUrl = `${server.baseUrl}/m2m/v1/webhooks/${seeded.subscriptionId}/deliveries?limit=50`;
    const headers = { authorization: `Bearer ${seeded.key}` };

    await cannon(listUrl, timing.warmupS, headers);
    const quietProbe = await startProber(server.baseUrl);
    const quietList = await cannon(listUrl, timing.measureS, headers);
    const quietHealth = await quietProbe.stop();
    log(`abuse/${db}: quiet list p99 ${quietList.p99Ms} ms (${fmt(quietList.rps)} req/s), /healthz p99 ${quietHealth.p99} ms`);

    await sleep(1000);
    const rss = new RssSampler(server.pid, 250);
    const abuser = await startAbuser(port, uploadKey);
    const meter = new CpuMeter({ server: server.pid, bench: process.pid, abuser: abuser.pid }, db === 'postgres');
    const probe = await startProber(server.baseUrl);
    const abuseList = await cannon(listUrl, timing.measureS, headers);
    const abuseHealth = await probe.stop();
    const cpuPct = meter.stop();
    const { bigBodies: bigStats, idleClosedByServer: idleClosed, slowClosedByServer: slowClosed } = await abuser.stop();
    const during = rss.stop();

    await sleep(10_000);
    const after = new RssSampler(server.pid, 250).stop();
    const startMb = during.startMb;
    const result: AbuseResult = {
      db,
      quiet: { list: quietList, healthzP99Ms: quietHealth.p99, healthzMaxMs: quietHealth.max },
      abuse: {
        list: abuseList,
        healthzP99Ms: abuseHealth.p99,
        healthzMaxMs: abuseHealth.max,
        healthzFailures: abuseHealth.failures,
        bigBodies: bigStats,
        idleOpen: IDLE_CONNECTIONS - idleClosed,
        idleClosedByServer: idleClosed,
        slowClosedByServer: slowClosed,
        cpuPct,
      },
      listP99Ratio: round(abuseList.p99Ms / Math.max(1, quietList.p99Ms), 2),
      rss: { startMb, maxMb: during.maxMb, after10sMb: after.endMb, recoveredPct: round(((after.endMb - startMb) / startMb) * 100, 1) },
    };
    log(
      `abuse/${db}: under abuse list p99 ${abuseList.p99Ms} ms (${result.listP99Ratio}× quiet), /healthz p99 ${abuseHealth.p99} ms; ` +
        `big bodies ${JSON.stringify(bigStats.answers)}; RSS ${startMb} → max ${during.maxMb} → ${after.endMb} MB 10 s after`,
    );
    return result;
  } finally {
    await stopChild(server?.child);
  }
}

export function printAbuse(results: AbuseResult[], label: (db: DbKind) => string): void {
  if (results.length === 0) return;
  const col = (f: (r: AbuseResult) => string) => results.map(f);
  const rows = [
    ['list p99 quiet / under abuse (ratio)', ...col((r) => `${r.quiet.list.p99Ms} / ${r.abuse.list.p99Ms} ms (${r.listP99Ratio}×)`)],
    ['list req/s quiet / under abuse', ...col((r) => `${fmt(r.quiet.list.rps)} / ${fmt(r.abuse.list.rps)}`)],
    ['list non-2xx / errors under abuse', ...col((r) => `${fmt(r.abuse.list.non2xx)} / ${fmt(r.abuse.list.errors)}`)],
    ['/healthz p99 (max) quiet', ...col((r) => `${r.quiet.healthzP99Ms} (${r.quiet.healthzMaxMs}) ms`)],
    ['/healthz p99 (max) under abuse; failures', ...col((r) => `${r.abuse.healthzP99Ms} (${r.abuse.healthzMaxMs}) ms; ${r.abuse.healthzFailures}`)],
    ['10 MB bodies sent → answers', ...col((r) => `${fmt(r.abuse.bigBodies.sent)} → ${Object.entries(r.abuse.bigBodies.answers).map(([s, n]) => `${s} ×${n}`).join(', ')}`)],
    ['idle connections closed by the server', ...col((r) => `${r.abuse.idleClosedByServer} of ${IDLE_CONNECTIONS}`)],
    ['slow-body connections closed by the server', ...col((r) => `${r.abuse.slowClosedByServer} of ${SLOW_CONNECTIONS}`)],
    ['server RSS start / max / 10 s after (change)', ...col((r) => `${r.rss.startMb} / ${r.rss.maxMb} / ${r.rss.after10sMb} MB (${r.rss.recoveredPct > 0 ? '+' : ''}${r.rss.recoveredPct}%)`)],
    ['CPU % server / bench / abuse clients / pg / other under abuse', ...col((r) => `${fmt(r.abuse.cpuPct.server)} / ${fmt(r.abuse.cpuPct.bench)} / ${fmt(r.abuse.cpuPct.abuser)} / ${fmt(r.abuse.cpuPct.postgres)} / ${fmt(r.abuse.cpuPct.other)}`)],
  ];
  const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
  rows.push(
    ['target: /healthz p99 < 50 ms under abuse', ...col((r) => verdict(r.abuse.healthzP99Ms < 50))],
    ['target: list p99 ≤ 2× quiet', ...col((r) => verdict(r.listP99Ratio <= 2))],
    ['target: RSS 10 s after ≤ 20% above its start', ...col((r) => verdict(r.rss.recoveredPct <= 20))],
  );
  printTable(
    `Scenario 6 — abuse: ${BIG_BODY_CLIENTS} clients × 10 MB bodies, ${IDLE_CONNECTIONS} idle and ${SLOW_CONNECTIONS} slow-body connections, ${LIST_CONNECTIONS} connections on the list route`,
    ['', ...results.map((r) => label(r.db))],
    rows,
  );
}
