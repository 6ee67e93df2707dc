/**
 * Scenario 1: GET /m2m/v1/webhooks/{id}/deliveries?limit=50 on the real server versus the minimal Fastify
 * route the foundation issue plans by (bench/minimal-server.ts) and a bare node:http server sending the same
 * bytes (pre-serialised, and re-serialised per request).
 */
import autocannon from 'autocannon';
import { CpuMeter, fmt, freePort, log, round, sleep, type DbKind } from './lib.js';
import { call, emitBody, newSchema, seedSubscription, startBare, startMinimal, startServer, stopChild, type Server } from './procs.js';

export interface Load {
  connections: number;
  seconds: number;
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** % of one core during the measured run: server (real or bare), bench (autocannon), postgres, other. */
  cpuPct: Record<string, number>;
}

export interface ApiResult {
  db: DbKind;
  responseBytes: number;
  contentType: string;
  rows: number;
  route: Load;
  routeSingle: Load;
  /** The minimal Fastify route (key hash + 2 queries, bench/minimal-server.ts) on a database of the same kind. */
  minimal: Load;
  /** real route req/s ÷ minimal route req/s (the foundation target: ≥ 1): the median of the alternating rounds. */
  ratioVsMinimal: number;
  /** Each round's ratio; `route` and `minimal` are the loads of the median round. */
  ratioRounds: number[];
  bare: Load;
  bareStringify: Load;
  ratioVsBare: number;
  ratioVsBareStringify: number;
}

/** Alternating measuring rounds of the real and the minimal route. */
const ROUNDS = 3;

export interface Timing {
  warmupS: number;
  measureS: number;
  singleS: number;
}

/** One autocannon run; bounded by its duration and, as a guard, stopped 20 s after it should have ended. */
async function cannon(url: string, connections: number, seconds: number, headers: Record<string, string> = {}): Promise<Omit<Load, 'cpuPct'>> {
  const instance = autocannon({ url, connections, duration: seconds, headers, timeout: 10 });
  const guard = setTimeout(() => instance.stop(), (seconds + 20) * 1000);
  const result = await instance;
  clearTimeout(guard);
  return {
    connections,
    seconds: result.duration,
    requests: result.requests.total,
    rps: round(result.requests.total / result.duration),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}

interface Target {
  url: string;
  pid: number | undefined;
  postgres: boolean;
  headers?: Record<string, string>;
}

async function measure(what: string, target: Target, connections: number, timing: Timing, seconds: number, warmup = true): Promise<Load> {
  if (warmup) await cannon(target.url, connections, timing.warmupS, target.headers);
  const meter = new CpuMeter({ server: target.pid, bench: process.pid }, target.postgres);
  const load = { ...(await cannon(target.url, connections, seconds, target.headers)), cpuPct: meter.stop() };
  log(`  ${what}: ${fmt(load.rps)} req/s, p50 ${load.p50Ms} ms, p99 ${load.p99Ms} ms, non-2xx ${load.non2xx}, errors ${load.errors}`);
  return load;
}

export async function runApi(db: DbKind, postgresUrl: string | undefined, timing: Timing): Promise<ApiResult> {
  const dbEnv: Record<string, string> =
    db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: newSchema(postgresUrl!) } : { DATA_DIR: 'memory://' };
  let server: Server | undefined;
  let bareChild: Awaited<ReturnType<typeof startBare>>['child'] | undefined;
  let minimalChild: Awaited<ReturnType<typeof startMinimal>>['child'] | undefined;
  try {
    log(`api/${db}: starting server (--role api)`);
    server = await startServer(`api-${db}`, 'api', dbEnv);
    // Nothing listens on this port, and with --role api nothing tries to deliver anyway.
    const closedPort = await freePort();
    const seeded = await seedSubscription(server.baseUrl, `http://127.0.0.1:${closedPort}/hook`);
    for (let batch = 0; batch < 6; batch += 1) {
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          call(server!.baseUrl, 'POST', `/admin/v1/tenants/${seeded.tenantId}/webhook-events`, { body: emitBody(batch * 10 + i) }),
        ),
      );
    }
    const routeUrl = `${server.baseUrl}/m2m/v1/webhooks/${seeded.subscriptionId}/deliveries?limit=50`;
    const headers = { authorization: `Bearer ${seeded.key}` };
    const sample = await fetch(routeUrl, { headers, signal: AbortSignal.timeout(10_000) });
    const body = await sample.text();
    const contentType = sample.headers.get('content-type') ?? 'application/json';
    if (!sample.ok) throw new Error(`list route answered ${sample.status}: ${body.slice(0, 300)}`);
    const rows = (JSON.parse(body) as { deliveries: unknown[] }).deliveries.length;
    if (rows !== 50) throw new Error(`list route returned ${rows} rows, expected 50`);
    log(`api/${db}: route returns ${rows} rows, ${fmt(Buffer.byteLength(body))} bytes, ${contentType}`);

    const minimalEnv: Record<string, string> =
      db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: newSchema(postgresUrl!) } : { DATA_DIR: 'memory://' };
    const minimalServer = await startMinimal(`minimal-${db}`, minimalEnv);
    minimalChild = minimalServer.child;

    // The real and the minimal route run side by side (the idle one costs nothing) and are measured in
    // alternating rounds (real, minimal; minimal, real; …): this machine's speed drifts by tens of percent
    // within a minute, so each round's ratio compares two runs taken moments apart, and the median round wins.
    const real: Target = { url: routeUrl, pid: server.pid, postgres: db === 'postgres', headers };
    const minimalTarget: Target = {
      url: minimalServer.url,
      pid: minimalServer.child.pid,
      postgres: db === 'postgres',
      headers: { authorization: `Bearer ${minimalServer.key}` },
    };
    await cannon(real.url, 32, timing.warmupS, real.headers);
    await cannon(minimalTarget.url, 32, timing.warmupS, minimalTarget.headers);
    const rounds: Array<{ route: Load; minimal: Load; ratio: number }> = [];
    const roundS = Math.max(2, Math.round(timing.measureS / 2));
    for (let i = 0; i < ROUNDS; i += 1) {
      const run = (which: 'real' | 'minimal') =>
        measure(`round ${i + 1}: ${which} route, 32 connections`, which === 'real' ? real : minimalTarget, 32, timing, roundS, false);
      let route: Load;
      let minimal: Load;
      if (i % 2 === 0) {
        route = await run('real');
        minimal = await run('minimal');
      } else {
        minimal = await run('minimal');
        route = await run('real');
      }
      rounds.push({ route, minimal, ratio: round(route.rps / minimal.rps, 3) });
    }
    const middle = [...rounds].sort((x, y) => x.ratio - y.ratio)[Math.floor(rounds.length / 2)];
    const { route, minimal } = middle;
    log(`api/${db}: real ÷ minimal per round ${rounds.map((r) => r.ratio).join(', ')}; median ${middle.ratio}`);
    const routeSingle = await measure('route, 1 connection', real, 1, timing, timing.singleS);
    await stopChild(server.child);
    server = undefined;
    await stopChild(minimalChild);
    minimalChild = undefined;
    await sleep(500);

    const bare = await startBare(`bare-${db}`, body, contentType);
    bareChild = bare.child;
    const bareTarget = (suffix: string): Target => ({ url: `${bare.base}${suffix}`, pid: bare.child.pid, postgres: false });
    const bareRaw = await measure('bare node:http, pre-serialised', bareTarget('/raw'), 32, timing, timing.measureS);
    const bareStringify = await measure('bare node:http, JSON.stringify(JSON.parse())', bareTarget('/stringify'), 32, timing, timing.measureS);
    return {
      db,
      responseBytes: Buffer.byteLength(body),
      contentType,
      rows,
      route,
      routeSingle,
      minimal,
      ratioVsMinimal: middle.ratio,
      ratioRounds: rounds.map((r) => r.ratio),
      bare: bareRaw,
      bareStringify,
      ratioVsBare: round(route.rps / bareRaw.rps, 3),
      ratioVsBareStringify: round(route.rps / bareStringify.rps, 3),
    };
  } finally {
    await stopChild(server?.child);
    await stopChild(minimalChild);
    await stopChild(bareChild);
  }
}
