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
  /** Issue 42's reads (PostgreSQL only), each against the minimal route in alternating rounds. */
  reads?: ReadVsMinimal[];
}

/** One integrator read against the minimal route: the median round's loads and ratio. */
export interface ReadVsMinimal {
  what: string;
  rows: number;
  route: Load;
  minimal: Load;
  ratioVsMinimal: number;
  ratioRounds: number[];
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

    // The real and the minimal route run side by side (the idle one costs nothing), measured in alternating rounds.
    const real: Target = { url: routeUrl, pid: server.pid, postgres: db === 'postgres', headers };
    const minimalTarget: Target = {
      url: minimalServer.url,
      pid: minimalServer.child.pid,
      postgres: db === 'postgres',
      headers: { authorization: `Bearer ${minimalServer.key}` },
    };
    await cannon(real.url, 32, timing.warmupS, real.headers);
    await cannon(minimalTarget.url, 32, timing.warmupS, minimalTarget.headers);

    const middle = await alternate('the list', real, minimalTarget, timing);
    const { route, minimal } = middle;
    log(`api/${db}: real ÷ minimal per round ${middle.rounds.join(', ')}; median ${middle.ratio}`);
    const reads = db === 'postgres' ? await integratorReads(server.baseUrl, server.pid, minimalTarget, timing) : undefined;
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
      ratioRounds: middle.rounds,
      bare: bareRaw,
      bareStringify,
      ratioVsBare: round(route.rps / bareRaw.rps, 3),
      ratioVsBareStringify: round(route.rps / bareStringify.rps, 3),
      ...(reads ? { reads } : {}),
    };
  } finally {
    await stopChild(server?.child);
    await stopChild(minimalChild);
    await stopChild(bareChild);
  }
}

/**
 * Measures `real` and `minimal` at 32 connections in alternating rounds (real, minimal; minimal, real; …): this
 * machine's speed drifts by tens of percent within a minute, so each round's ratio compares two runs taken moments
 * apart, and the median round wins.
 */
async function alternate(what: string, real: Target, minimal: Target, timing: Timing): Promise<{ route: Load; minimal: Load; ratio: number; rounds: number[] }> {
  const rounds: Array<{ route: Load; minimal: Load; ratio: number }> = [];
  const roundS = Math.max(2, Math.round(timing.measureS / 2));
  for (let i = 0; i < ROUNDS; i += 1) {
    const run = (which: 'real' | 'minimal') => measure(`round ${i + 1}: ${which === 'real' ? what : 'minimal route'}, 32 connections`, which === 'real' ? real : minimal, 32, timing, roundS, false);
    let route: Load;
    let other: Load;
    if (i % 2 === 0) {
      route = await run('real');
      other = await run('minimal');
    } else {
      other = await run('minimal');
      route = await run('real');
    }
    rounds.push({ route, minimal: other, ratio: round(route.rps / other.rps, 3) });
  }
  const middle = [...rounds].sort((x, y) => x.ratio - y.ratio)[Math.floor(rounds.length / 2)];
  return { ...middle, rounds: rounds.map((r) => r.ratio) };
}

/** Issue 42's reads with a key alone: the tenant's channels, 200 opportunities, one contact. */
async function integratorReads(base: string, serverPid: number | undefined, minimal: Target, timing: Timing): Promise<ReadVsMinimal[]> {
  const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name: 'Bench Integrator Hotel' } });
  const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, {
    body: { name: 'bench', scopes: ['channels:read', 'crm:sales:read', 'contacts:read'] },
  });
  let channelId = '';
  for (const [kind, name] of [['whatsapp', 'WhatsApp'], ['webchat', 'Web'], ['instagram', 'Instagram']]) {
    const channel = await call<{ channelId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/channels`, { body: { kind, name } });
    channelId ||= channel.channelId;
  }
  const { contactId, conversationId } = await call<{ contactId: string; conversationId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/inbound-messages`, {
    body: { channelId, contact: { name: 'Ana López', phone: '+525550000001' }, text: 'Hola' },
  });
  for (let batch = 0; batch < 10; batch += 1) {
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const { leadId } = await call<{ leadId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/leads`, { body: { name: `Lead ${batch * 20 + i}`, conversationId } });
        await call(base, 'POST', `/admin/v1/tenants/${tenantId}/opportunities`, { body: { leadId, stage: 'quote', status: 'open' } });
      }),
    );
  }
  const headers = { authorization: `Bearer ${key}` };
  const reads: Array<{ what: string; path: string; rows: (body: Record<string, unknown[]>) => number }> = [
    { what: 'GET /channels', path: '/m2m/v1/channels', rows: (body) => body.channels.length },
    { what: 'GET /crm/opportunities?limit=200', path: '/m2m/v1/crm/opportunities?limit=200', rows: (body) => body.opportunities.length },
    { what: 'GET /contacts/{id}', path: `/m2m/v1/contacts/${contactId}`, rows: () => 1 },
  ];
  const results: ReadVsMinimal[] = [];
  for (const read of reads) {
    const url = `${base}${read.path}`;
    const sample = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
    const body = await sample.text();
    if (!sample.ok) throw new Error(`${read.what} answered ${sample.status}: ${body.slice(0, 300)}`);
    const rows = read.rows(JSON.parse(body) as Record<string, unknown[]>);
    log(`api/postgres: ${read.what}: ${rows} rows, ${fmt(Buffer.byteLength(body))} bytes`);
    const real: Target = { url, pid: serverPid, postgres: true, headers };
    await cannon(url, 32, timing.warmupS, headers);
    const middle = await alternate(read.what, real, minimal, timing);
    log(`api/postgres: ${read.what} ÷ minimal per round ${middle.rounds.join(', ')}; median ${middle.ratio}`);
    results.push({ what: read.what, rows, route: middle.route, minimal: middle.minimal, ratioVsMinimal: middle.ratio, ratioRounds: middle.rounds });
  }
  return results;
}
