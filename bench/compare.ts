/**
 * `node --import tsx bench/compare.ts <checkout A> <checkout B> [--rounds 6] [--seconds 4] [--workers]`
 *
 * Scenario 7's loads (bench/replies.ts) on two checkouts side by side, on PostgreSQL: each checkout's compiled API
 * node (`npm run build` in each) on a schema of its own with the same world, and the loads run in rounds that
 * alternate A and B (A first in odd rounds, B first in even ones), so that a slow spell of the shared machine falls
 * on both. Per load: each side's mean req/s, B ÷ A, the per-round ratios, and CPU per request (server, PostgreSQL).
 * With `--workers`, a worker node per side then sends, and replies are measured while it does (with the sends per
 * second meanwhile); each side's backlog is drained before the next round.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import autocannon, { type Options } from 'autocannon';
import { CpuMeter, DEFAULT_POSTGRES_URL, fmt, freePort, log, sleep } from './lib.js';
import { ADMIN_TOKEN, newSchema, withPg } from './procs.js';
import { repliesLoads, seedRepliesWorld } from './replies.js';

interface Side {
  name: 'A' | 'B';
  checkout: string;
  schema: string;
  api: ChildProcess;
  loads: Record<'read' | 'replies' | 'page', Options>;
}

interface Measured {
  rps: number;
  serverUs: number;
  postgresUs: number;
  sendsPerSecond?: number;
}

const url = process.env.DATABASE_URL ?? DEFAULT_POSTGRES_URL;
const secretKey = randomBytes(32).toString('hex');
const children: ChildProcess[] = [];

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
}

async function waitFor(address: string): Promise<void> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      const response = await fetch(address, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${address} not ready after 90 s`);
    await sleep(50);
  }
}

/** The checkout's compiled server in a role; its API (or, for a worker, metrics) address once it answers. */
async function startNode(checkout: string, schema: string, role: 'api' | 'worker'): Promise<{ child: ChildProcess; base: string }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const env = {
    ...process.env,
    ADMIN_TOKEN,
    SECRET_KEY: secretKey,
    HOST: '127.0.0.1',
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: 'warn',
    RATE_LIMIT_RPS: '1000000',
    RATE_LIMIT_BURST: '1000000',
    DATABASE_URL: url,
    DATABASE_SCHEMA: schema,
  };
  const child = spawn(process.execPath, ['dist/server/main.js', '--role', role], { cwd: checkout, env, stdio: 'ignore' });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  await waitFor(role === 'api' ? `${base}/readyz` : `http://127.0.0.1:${metricsPort}/metrics`);
  return { child, base };
}

/** Scenario 7's world and loads (bench/replies.ts) on a checkout's API node. */
async function prepare(name: Side['name'], checkout: string): Promise<Side> {
  const schema = newSchema(url);
  const { child, base } = await startNode(checkout, schema, 'api');
  const world = await seedRepliesWorld(base, url, schema, `Compare ${name}`);
  return { name, checkout, schema, api: child, loads: repliesLoads(base, world, `compare-${name}-${randomBytes(3).toString('hex')}`) };
}

async function measure(side: Side, options: Options, seconds: number): Promise<Measured> {
  const cpu = new CpuMeter({ server: side.api.pid }, true);
  const result = await autocannon({ ...options, duration: seconds });
  const pct = cpu.stop();
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${side.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  const rps = result['2xx'] / result.duration;
  return { rps, serverUs: (pct.server * 1e4) / rps, postgresUs: (pct.postgres * 1e4) / rps };
}

const countSql = (schema: string) => `SELECT count(*) FILTER (WHERE status = 'queued')::int AS queued, count(*) FILTER (WHERE status <> 'queued')::int AS sent FROM ${schema}.message_requests`;
const sends = (side: Side) => withPg(url, async (client) => (await client.query<{ queued: number; sent: number }>(countSql(side.schema))).rows[0]);

async function drained(sides: Side[]): Promise<void> {
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    const left = await Promise.all(sides.map(async (side) => (await sends(side)).queued));
    if (left.every((n) => n === 0)) return;
    await sleep(500);
  }
  throw new Error('sends still queued after 180 s');
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

function report(what: string, a: Measured[], b: Measured[]): void {
  const ratios = a.map((measured, i) => b[i].rps / measured.rps);
  const per = (pick: (m: Measured) => number | undefined, side: Measured[]) => fmt(mean(side.map((m) => pick(m) ?? 0)));
  const cpu = a[0].sendsPerSecond === undefined
    ? `server ${per((m) => m.serverUs, a)} / ${per((m) => m.serverUs, b)} µs, PostgreSQL ${per((m) => m.postgresUs, a)} / ${per((m) => m.postgresUs, b)} µs a request`
    : `sends meanwhile ${per((m) => m.sendsPerSecond, a)} / ${per((m) => m.sendsPerSecond, b)}/s`;
  log(`${what}: A ${fmt(mean(a.map((m) => m.rps)))} req/s, B ${fmt(mean(b.map((m) => m.rps)))} req/s, B ÷ A ${fmt(mean(b.map((m) => m.rps)) / mean(a.map((m) => m.rps)), 3)} (rounds ${ratios.map((r) => fmt(r, 2)).join(', ')}); ${cpu}`);
}

async function main(): Promise<void> {
  const [checkoutA, checkoutB] = process.argv.slice(2, 4);
  if (!checkoutA || !checkoutB || checkoutA.startsWith('--') || checkoutB.startsWith('--')) {
    throw new Error('usage: node --import tsx bench/compare.ts <checkout A> <checkout B> [--rounds 6] [--seconds 4] [--workers]');
  }
  const rounds = option('--rounds', 6);
  const seconds = option('--seconds', 4);
  const sides = [await prepare('A', checkoutA), await prepare('B', checkoutB)];
  const [a, b] = sides;
  log(`compare: A ${checkoutA} (${a.schema}), B ${checkoutB} (${b.schema}); ${rounds} rounds of ${seconds} s per load`);
  for (const side of sides) for (const load of Object.values(side.loads)) await autocannon({ ...load, duration: 2 });
  const results = { A: { read: [] as Measured[], replies: [] as Measured[], page: [] as Measured[], sending: [] as Measured[] }, B: { read: [] as Measured[], replies: [] as Measured[], page: [] as Measured[], sending: [] as Measured[] } };
  const order = (round: number) => (round % 2 === 0 ? [a, b] : [b, a]);
  for (let round = 0; round < rounds; round++) {
    for (const load of ['read', 'replies', 'page'] as const) {
      for (const side of order(round)) results[side.name][load].push(await measure(side, side.loads[load], seconds));
    }
  }
  report('GET /conversations/{id}', results.A.read, results.B.read);
  report('POST /conversations/{id}/messages', results.A.replies, results.B.replies);
  report('GET /conversations/{id}/messages (10,000 messages)', results.A.page, results.B.page);
  if (process.argv.includes('--workers')) {
    for (const side of sides) await startNode(side.checkout, side.schema, 'worker');
    await drained(sides);
    for (let round = 0; round < rounds; round++) {
      for (const side of order(round)) {
        const before = await sends(side);
        const started = Date.now();
        const measured = await measure(side, side.loads.replies, seconds);
        const after = await sends(side);
        results[side.name].sending.push({ ...measured, sendsPerSecond: (after.sent - before.sent) / ((Date.now() - started) / 1000) });
        await drained(sides);
      }
    }
    report('POST /conversations/{id}/messages, a worker node sending', results.A.sending, results.B.sending);
  }
  await withPg(url, async (client) => {
    for (const side of sides) await client.query(`DROP SCHEMA ${side.schema} CASCADE`);
  });
}

try {
  await main();
} finally {
  for (const child of children) child.kill('SIGINT');
}
