/**
 * Scenario 6: abuse. The real server (`--role api`) takes normal traffic (64 connections on the deliveries
 * list) first alone ("quiet"), then while 10 clients send 10 MB bodies over and over, 500 connections sit
 * idle, and 20 connections trickle a body one byte at a time. A prober measures /healthz on its own
 * connection throughout. Afterwards the server's RSS is sampled for 10 s. Targets: /healthz p99 < 50 ms,
 * list p99 under abuse ≤ 2× quiet, RSS 10 s after within 20% of its start.
 */
import http from 'node:http';
import net from 'node:net';
import autocannon from 'autocannon';
import { CpuMeter, RssSampler, fmt, freePort, log, percentile, printTable, round, sleep, type DbKind } from './lib.js';
import { call, emitBody, newSchema, seedSubscription, startServer, stopChild, type Server } from './procs.js';

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

const BIG_BODY_CLIENTS = 10;
const BIG_BODY_BYTES = 10 * 1024 * 1024;
const IDLE_CONNECTIONS = 500;
const SLOW_CONNECTIONS = 20;
const LIST_CONNECTIONS = 64;

async function cannon(url: string, seconds: number, headers: Record<string, string>): Promise<AbuseLoad> {
  const instance = autocannon({ url, connections: LIST_CONNECTIONS, duration: seconds, headers, timeout: 10 });
  const guard = setTimeout(() => instance.stop(), (seconds + 20) * 1000);
  const result = await instance;
  clearTimeout(guard);
  return { rps: round(result.requests.total / result.duration), p50Ms: result.latency.p50, p99Ms: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

/** GET /healthz every 20 ms on one kept-alive connection; latencies in ms. */
function healthProbe(base: string): { stop: () => { p99: number; max: number; failures: number } } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let failures = 0;
  let running = true;
  const loop = async () => {
    while (running) {
      const started = performance.now();
      await new Promise<void>((resolve) => {
        const req = http.get(`${base}/healthz`, { agent, timeout: 10_000 }, (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) latencies.push(performance.now() - started);
            else failures += 1;
            resolve();
          });
        });
        req.on('error', () => {
          failures += 1;
          resolve();
        });
        req.on('timeout', () => req.destroy());
      });
      await sleep(20);
    }
  };
  const done = loop();
  return {
    stop: () => {
      running = false;
      void done.then(() => agent.destroy());
      const sorted = [...latencies].sort((a, b) => a - b);
      return { p99: round(percentile(sorted, 99), 1), max: round(sorted[sorted.length - 1] ?? Number.NaN, 1), failures };
    },
  };
}

/**
 * One client sending 10 MB bodies back to back on new connections: half to the upload route (15 MB limit:
 * parsed, then refused by validation), half chunked to a 1 MB route (refused while streaming).
 */
function bigBodySender(port: number, key: string, upload: boolean, stats: { sent: number; answers: Record<string, number> }, isRunning: () => boolean): Promise<void> {
  const text = 'x'.repeat(BIG_BODY_BYTES);
  const body = Buffer.from(JSON.stringify({ sourceType: 'text', title: 'big', text }));
  const head = upload
    ? `POST /m2m/v1/knowledge/sources HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    : `POST /m2m/v1/webhooks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
  const one = () =>
    new Promise<void>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      let answer = '';
      socket.setTimeout(30_000, () => socket.destroy());
      socket.on('data', (chunk) => {
        if (answer.length < 64) answer += chunk.toString('latin1');
        // An HTTP client keeps its side open until the answer (Node's server drops a request whose client half-closed).
        if (/^HTTP\/1\.1 \d{3}/.test(answer)) socket.end();
      });
      socket.on('error', () => undefined);
      socket.on('close', () => {
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 'closed';
        stats.answers[status] = (stats.answers[status] ?? 0) + 1;
        resolve();
      });
      socket.write(head);
      if (upload) socket.write(body);
      else {
        for (let offset = 0; offset < body.length && !socket.destroyed; offset += 1024 * 1024) {
          const chunk = body.subarray(offset, offset + 1024 * 1024);
          socket.write(`${chunk.length.toString(16)}\r\n`);
          socket.write(chunk);
          socket.write('\r\n');
        }
        socket.write('0\r\n\r\n');
      }
      stats.sent += 1;
    });
  return (async () => {
    while (isRunning()) await one();
  })();
}

/** Connections that connect and send nothing; counts those the server closes. */
function idleConnections(port: number, count: number): { sockets: net.Socket[]; closedByServer: () => number } {
  let closed = 0;
  const sockets = Array.from({ length: count }, () => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.on('end', () => (closed += 1));
    return socket;
  });
  return { sockets, closedByServer: () => closed };
}

/** Connections that announce a 1 MB body and send one byte every 500 ms. */
function slowBodies(port: number, key: string, count: number): { sockets: net.Socket[]; closedByServer: () => number; stop: () => void } {
  let closed = 0;
  const timers: NodeJS.Timeout[] = [];
  const sockets = Array.from({ length: count }, () => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.on('end', () => (closed += 1));
    socket.write(`POST /m2m/v1/webhooks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{`);
    timers.push(setInterval(() => !socket.destroyed && socket.write(' '), 500));
    return socket;
  });
  return { sockets, closedByServer: () => closed, stop: () => timers.forEach(clearInterval) };
}

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
    const quietProbe = healthProbe(server.baseUrl);
    const quietList = await cannon(listUrl, timing.measureS, headers);
    const quietHealth = quietProbe.stop();
    log(`abuse/${db}: quiet list p99 ${quietList.p99Ms} ms (${fmt(quietList.rps)} req/s), /healthz p99 ${quietHealth.p99} ms`);

    await sleep(1000);
    const rss = new RssSampler(server.pid, 250);
    const meter = new CpuMeter({ server: server.pid, bench: process.pid }, db === 'postgres');
    let running = true;
    const bigStats = { sent: 0, answers: {} as Record<string, number> };
    const senders = Array.from({ length: BIG_BODY_CLIENTS }, (_, i) => bigBodySender(port, uploadKey, i % 2 === 0, bigStats, () => running));
    const idle = idleConnections(port, IDLE_CONNECTIONS);
    const slow = slowBodies(port, uploadKey, SLOW_CONNECTIONS);
    const probe = healthProbe(server.baseUrl);
    const abuseList = await cannon(listUrl, timing.measureS, headers);
    const abuseHealth = probe.stop();
    running = false;
    const cpuPct = meter.stop();
    const idleClosed = idle.closedByServer();
    const slowClosed = slow.closedByServer();
    slow.stop();
    for (const socket of [...idle.sockets, ...slow.sockets]) socket.destroy();
    await Promise.all(senders);
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
    ['CPU % server / bench / pg / other under abuse', ...col((r) => `${fmt(r.abuse.cpuPct.server)} / ${fmt(r.abuse.cpuPct.bench)} / ${fmt(r.abuse.cpuPct.postgres)} / ${fmt(r.abuse.cpuPct.other)}`)],
  ];
  const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
  rows.push(
    ['target: /healthz p99 < 50 ms under abuse', ...col((r) => verdict(r.abuse.healthzP99Ms < 50))],
    ['target: list p99 ≤ 2× quiet', ...col((r) => verdict(r.listP99Ratio <= 2))],
    ['target: RSS 10 s after within 20% of start', ...col((r) => verdict(Math.abs(r.rss.recoveredPct) <= 20))],
  );
  printTable(
    `Scenario 6 — abuse: ${BIG_BODY_CLIENTS} clients × 10 MB bodies, ${IDLE_CONNECTIONS} idle and ${SLOW_CONNECTIONS} slow-body connections, ${LIST_CONNECTIONS} connections on the list route`,
    ['', ...results.map((r) => label(r.db))],
    rows,
  );
}
