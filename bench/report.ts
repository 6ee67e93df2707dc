/** The targets from bench/README.md, checked against the figures. */
import type { ApiResult } from './api.js';
import { fmt, printTable } from './lib.js';
import { dbLabel } from './procs.js';
import type { WebhookResult } from './webhooks.js';

export interface Check {
  check: string;
  db: string;
  value: string;
  target: string;
  pass: boolean;
}

/** RSS counts as flat when the worker grows by at most this much during the drain. */
export const FLAT_RSS_GROWTH_MB = 50;

export function targets(api: ApiResult[], webhooks: WebhookResult[], quick: boolean): Check[] {
  const checks: Check[] = [];
  for (const r of api) {
    const floor = r.db === 'postgres' ? 2_300 : 450;
    checks.push({ check: 'list route req/s (32 conns)', db: dbLabel(r.db), value: fmt(r.route.rps), target: `≥ ${fmt(floor)}`, pass: r.route.rps >= floor });
    if (r.db === 'postgres') {
      checks.push({ check: 'list route p99 (32 conns)', db: dbLabel(r.db), value: `${r.route.p99Ms} ms`, target: '< 30 ms', pass: r.route.p99Ms < 30 });
    }
    const bad = r.route.non2xx + r.routeSingle.non2xx + r.route.errors + r.route.timeouts;
    checks.push({ check: 'list route non-2xx + errors', db: dbLabel(r.db), value: fmt(bad), target: '= 0', pass: bad === 0 });
  }
  for (const r of webhooks) {
    const db = dbLabel(r.db);
    if (r.db === 'postgres') {
      checks.push({ check: 'drain deliveries/s', db, value: fmt(r.drain.deliveriesPerSec), target: '≥ 3,000', pass: r.drain.complete && r.drain.deliveriesPerSec >= 3_000 });
      checks.push({
        check: `commit→receipt p99 at ${fmt(r.latency.targetRate)}/s`,
        db,
        value: `${fmt(r.latency.commitToReceipt.p99Ms)} ms (${fmt(r.latency.emitsPerSec)} emits/s)`,
        target: '< 150 ms at 1,000/s',
        pass: r.latency.commitToReceipt.p99Ms < 150 && r.latency.emitsPerSec >= 0.95 * r.latency.targetRate && r.latency.missing === 0,
      });
    }
    const growth = r.drain.workerRss.maxMb - r.drain.workerRss.startMb;
    checks.push({
      check: `worker RSS flat, ${fmt(r.drain.pending)} pending${quick || r.drain.pending < 100_000 ? ' (not 100k)' : ''}`,
      db,
      value: `+${fmt(growth, 1)} MB (max ${fmt(r.drain.workerRss.maxMb, 1)} MB)`,
      target: `growth ≤ ${FLAT_RSS_GROWTH_MB} MB`,
      pass: growth <= FLAT_RSS_GROWTH_MB,
    });
    checks.push({ check: 'every delivery received', db, value: `${r.drain.complete ? 'drain ok' : 'drain INCOMPLETE'}, ${fmt(r.latency.missing)} missing`, target: 'all', pass: r.drain.complete && r.latency.missing === 0 });
  }
  return checks;
}

export function printTargets(checks: Check[]): void {
  if (checks.length === 0) return;
  printTable(
    'Targets (bench/README.md)',
    ['check', 'database', 'measured', 'target', 'result'],
    checks.map((c) => [c.check, c.db, c.value, c.target, c.pass ? 'PASS' : 'FAIL']),
  );
}
