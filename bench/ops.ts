/**
 * Scenario `ops` (issue 22): the compiled server (`node dist/server/main.js`, as `npm start` runs it) on each
 * database: time from spawn to ready on a fresh database and idle RSS; then, on one database, the list route
 * with metrics on and off and with the Redis rate limit on and off, against the minimal route, all in one run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { fmt, freePort, log, median, printTable, round, rssKb, sleep, type DbKind } from './lib.js';
import { call, emitBody, newSchema, seedSubscription, startMinimal, startServer, stopChild, type Server } from './procs.js';
import type { Timing } from './api.js';

export interface StartFigure {
  db: DbKind;
  readyMs: number;
  idleRssMb: number;
}

export interface VariantFigure {
  variant: string;
  rps: number[];
  /** Median of the rounds' req/s ÷ the minimal route's req/s of the same round. */
  ratioVsMinimal: number;
  /** Median of the rounds' req/s ÷ the plain server's req/s of the same round. */
  ratioVsPlain: number;
}

export interface OpsResult {
  starts: StartFigure[];
  db: DbKind;
  variants: VariantFigure[];
}

const IDLE_WAIT_MS = 5_000;
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

async function rps(url: string, headers: Record<string, string>, seconds: number): Promise<number> {
  const result = await autocannon({ url, connections: 32, duration: seconds, headers, timeout: 10 });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return round(result.requests.total / result.duration);
}

function dbEnvOf(db: DbKind, postgresUrl: string | undefined, dataDir: string): Record<string, string> {
  return db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: newSchema(postgresUrl!) } : { DATA_DIR: dataDir };
}

/** Fresh database, compiled start, ready time, RSS after IDLE_WAIT_MS of idleness. */
async function measureStart(db: DbKind, postgresUrl: string | undefined): Promise<StartFigure> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'm2m-bench-ops-'));
  let server: Server | undefined;
  try {
    server = await startServer(`ops-start-${db}`, 'all', dbEnvOf(db, postgresUrl, dataDir), {}, { compiled: true });
    await sleep(IDLE_WAIT_MS);
    const idleRssMb = round((rssKb(server.pid) ?? 0) / 1024, 1);
    log(`ops/${db}: ready in ${server.readyMs} ms on a fresh database; idle RSS ${idleRssMb} MB`);
    return { db, readyMs: server.readyMs, idleRssMb };
  } finally {
    await stopChild(server?.child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function runOps(dbs: DbKind[], postgresUrl: string | undefined, timing: Timing): Promise<OpsResult> {
  const starts: StartFigure[] = [];
  for (const db of dbs) {
    // Twice: the first start of a run also pays for cold file caches.
    await measureStart(db, postgresUrl);
    starts.push(await measureStart(db, postgresUrl));
  }

  // The throughput comparison runs on PostgreSQL when it is there (several servers cannot share a PGlite).
  const db: DbKind = dbs.includes('postgres') ? 'postgres' : 'pglite';
  const servers: Server[] = [];
  let minimalChild: Awaited<ReturnType<typeof startMinimal>>['child'] | undefined;
  const dataDirs: string[] = [];
  try {
    const env = (): Record<string, string> => {
      const dir = mkdtempSync(path.join(tmpdir(), 'm2m-bench-ops-'));
      dataDirs.push(dir);
      return dbEnvOf(db, postgresUrl, dir);
    };
    const metricsPort = String(await freePort());
    const variants: Array<{ variant: string; extra: Record<string, string> }> = [
      { variant: 'plain', extra: {} },
      { variant: 'metrics on (METRICS_PORT)', extra: { METRICS_PORT: metricsPort } },
      { variant: 'Redis rate limit on (REDIS_URL)', extra: { REDIS_URL, REDIS_KEY_PREFIX: `m2m-bench-${randomBytes(4).toString('hex')}:` } },
    ];
    const targets: Array<{ variant: string; url: string; headers: Record<string, string> }> = [];
    for (const { variant, extra } of variants) {
      const server = await startServer(`ops-${variant.split(' ')[0].toLowerCase()}-${db}`, 'api', env(), extra, { compiled: true });
      servers.push(server);
      const closedPort = await freePort();
      const seeded = await seedSubscription(server.baseUrl, `http://127.0.0.1:${closedPort}/hook`);
      for (let batch = 0; batch < 6; batch += 1) {
        await Promise.all(Array.from({ length: 10 }, (_, i) => call(server.baseUrl, 'POST', `/admin/v1/tenants/${seeded.tenantId}/webhook-events`, { body: emitBody(batch * 10 + i) })));
      }
      targets.push({ variant, url: `${server.baseUrl}/m2m/v1/webhooks/${seeded.subscriptionId}/deliveries?limit=50`, headers: { authorization: `Bearer ${seeded.key}` } });
    }
    const minimal = await startMinimal(`ops-minimal-${db}`, env());
    minimalChild = minimal.child;
    targets.push({ variant: 'minimal Fastify route', url: minimal.url, headers: { authorization: `Bearer ${minimal.key}` } });

    for (const target of targets) await rps(target.url, target.headers, timing.warmupS);
    // Rounds in rotating order; each round compares figures taken moments apart (this machine's speed drifts).
    const rounds = 3;
    const seconds = Math.max(2, Math.round(timing.measureS / 2));
    const perRound: Array<Map<string, number>> = [];
    for (let r = 0; r < rounds; r += 1) {
      const order = targets.map((_, i) => targets[(i + r) % targets.length]);
      const figures = new Map<string, number>();
      for (const target of order) figures.set(target.variant, await rps(target.url, target.headers, seconds));
      log(`ops/${db} round ${r + 1}: ${[...figures].map(([k, v]) => `${k} ${fmt(v)} req/s`).join('; ')}`);
      perRound.push(figures);
    }
    const figures: VariantFigure[] = targets.map(({ variant }) => ({
      variant,
      rps: perRound.map((f) => f.get(variant)!),
      ratioVsMinimal: round(median(perRound.map((f) => f.get(variant)! / f.get('minimal Fastify route')!)), 3),
      ratioVsPlain: round(median(perRound.map((f) => f.get(variant)! / f.get('plain')!)), 3),
    }));
    return { starts, db, variants: figures };
  } finally {
    await Promise.all(servers.map((server) => stopChild(server.child)));
    await stopChild(minimalChild);
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  }
}

export function printOps(result: OpsResult | undefined, dbLabel: (db: DbKind) => string): void {
  if (!result) return;
  printTable(
    'Scenario ops — compiled start (node dist/server/main.js --role all) on a fresh database',
    ['database', 'ready (ms)', 'idle RSS (MB)', 'target'],
    result.starts.map((s) => [dbLabel(s.db), fmt(s.readyMs), fmt(s.idleRssMb, 1), s.db === 'postgres' ? 'ready < 800 ms, RSS ≤ 110 MB' : 'ready < 2000 ms, RSS ≤ 200 MB']),
  );
  printTable(
    `Scenario ops — list route (GET …/deliveries?limit=50, 32 connections), ${dbLabel(result.db)}, median of 3 rotating rounds`,
    ['server', 'req/s per round', '÷ minimal', '÷ plain'],
    result.variants.map((v) => [v.variant, v.rps.map((n) => fmt(n)).join(' / '), fmt(v.ratioVsMinimal, 3), fmt(v.ratioVsPlain, 3)]),
  );
}
