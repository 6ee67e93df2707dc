/** Small helpers shared by the bench scenarios: arguments, timing, statistics, RSS, tables. */
import { readFileSync, readdirSync } from 'node:fs';
import { cpus } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const OUT_DIR = path.join(ROOT, '.bench');
export const LOG_DIR = path.join(OUT_DIR, 'logs');
export const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

export type DbKind = 'pglite' | 'postgres';

export const SCENARIOS = ['api', 'webhooks', 'conversations', 'knowledge', 'crawl', 'abuse', 'replies', 'events', 'recover', 'devstart', 'ops', 'nodes', 'search', 'inbound', 'webchat'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface Args {
  /** Scenarios to run, in SCENARIOS order; undefined = all of them. */
  only: Scenario[] | undefined;
  db: DbKind | 'both' | undefined;
  quick: boolean;
}

export const USAGE = `usage: npm run bench -- [--only ${SCENARIOS.join('|')}[,…]] [--db pglite|postgres|both] [--quick]`;

export function parseArgs(argv: string[]): Args {
  const args: Args = { only: undefined, db: undefined, quick: false };
  for (let i = 0; i < argv.length; i += 1) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--quick') args.quick = true;
    else if (flag === '--only') {
      const wanted = new Set([...(args.only ?? []), ...value().split(',').map((s) => s.trim()).filter(Boolean)]);
      for (const v of wanted) {
        if (!(SCENARIOS as readonly string[]).includes(v)) throw new Error(`--only takes ${SCENARIOS.join(', ')} (comma-separated), got "${v}"`);
      }
      if (wanted.size === 0) throw new Error(`--only needs a scenario: ${SCENARIOS.join(', ')}`);
      args.only = SCENARIOS.filter((s) => wanted.has(s));
    } else if (flag === '--db') {
      const v = value();
      if (v !== 'pglite' && v !== 'postgres' && v !== 'both') throw new Error(`--db must be pglite, postgres or both, got "${v}"`);
      args.db = v;
    } else if (flag === '--help' || flag === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument "${argv[i]}" (try --help)`);
  }
  return args;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A port nothing listens on right now (the listener is closed again before returning). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function summarise(values: number[]): { n: number; p50: number; p99: number; max: number; min: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? Number.NaN, min: sorted[0] ?? Number.NaN };
}

/** VmRSS of a process in KiB, or undefined when it is gone. */
export function rssKb(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU time (user + system), the CPU time of its exited children it has reaped (cutime + cstime), parent pid and
 * command name of a process; undefined when it is gone. Assumes CLK_TCK = 100.
 */
function procStat(pid: number | string): { comm: string; ppid: number; cpu: number; reapedCpu: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const fields = stat.slice(close + 2).split(' ');
    return {
      comm: stat.slice(stat.indexOf('(') + 1, close),
      ppid: Number(fields[1]),
      cpu: (Number(fields[11]) + Number(fields[12])) / 100,
      reapedCpu: (Number(fields[13]) + Number(fields[14])) / 100,
    };
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds used so far by the local PostgreSQL server: every live process called `postgres`, plus the CPU of
 * the exited children the postmaster has reaped (backends of closed connections, autovacuum workers), which the
 * kernel adds to the parent that waited for them. Over an interval the difference is exact: a process that
 * exited meanwhile is in the start figure with its CPU until then and in the end figure with its whole lifetime.
 */
function postgresCpu(): number {
  const stats = new Map<string, { ppid: number; cpu: number; reapedCpu: number }>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = procStat(pid);
    if (stat?.comm === 'postgres') stats.set(pid, stat);
  }
  let total = 0;
  for (const stat of stats.values()) {
    total += stat.cpu;
    // The postmaster is the postgres process whose parent is not one.
    if (!stats.has(String(stat.ppid))) total += stat.reapedCpu;
  }
  return total;
}

/** Whole-machine CPU counters from /proc/stat: busy and total ticks (all cores). */
function machineTicks(): { busy: number; iowait: number; total: number } {
  try {
    const [, ...parts] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
    const n = parts.map(Number);
    const total = n.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - n[3] - (n[4] ?? 0), iowait: n[4] ?? 0, total };
  } catch {
    return { busy: 0, iowait: 0, total: 0 };
  }
}

/**
 * CPU use over an interval, in % of one core: each named process, optionally the local PostgreSQL server
 * (`postgres`), `other` = every other busy cycle on the machine (other programs, but also kernel threads,
 * e.g. the file system journal flushing PostgreSQL's WAL), and `iowait` = idle time spent waiting for disk.
 * `machine` is the share of all cores that was busy.
 */
export class CpuMeter {
  private readonly start = Date.now();
  private readonly startCpu: Map<string, number | undefined>;
  private readonly startPostgres: number | undefined;
  private readonly startMachine = machineTicks();
  constructor(private readonly pids: Record<string, number | undefined>, withPostgres: boolean) {
    this.startCpu = new Map(Object.entries(pids).map(([name, pid]) => [name, pid === undefined ? undefined : procStat(pid)?.cpu]));
    this.startPostgres = withPostgres ? postgresCpu() : undefined;
  }
  stop(): Record<string, number> {
    const seconds = Math.max(0.001, (Date.now() - this.start) / 1000);
    const pct = (cpu: number) => round((cpu / seconds) * 100);
    const out: Record<string, number> = {};
    let ours = 0;
    for (const [name, pid] of Object.entries(this.pids)) {
      const before = this.startCpu.get(name);
      const after = pid === undefined ? undefined : procStat(pid)?.cpu;
      if (before === undefined || after === undefined) continue;
      out[name] = pct(after - before);
      ours += after - before;
    }
    if (this.startPostgres !== undefined) {
      const used = postgresCpu() - this.startPostgres;
      out.postgres = pct(used);
      ours += used;
    }
    const m = machineTicks();
    const ticks = m.total - this.startMachine.total;
    if (ticks > 0) {
      const busyShare = (m.busy - this.startMachine.busy) / ticks;
      out.machine = round(busyShare * 100);
      out.other = Math.max(0, pct(busyShare * cpus().length * seconds - ours));
      out.iowait = pct(((m.iowait - this.startMachine.iowait) / ticks) * cpus().length * seconds);
    }
    return out;
  }
}

export interface RssFigures {
  startMb: number;
  maxMb: number;
  endMb: number;
  samples: number;
  /** Every sample in MB, in order (one per interval). */
  seriesMb: number[];
}

/** Samples a process's RSS every `everyMs` until stopped. */
export class RssSampler {
  private readonly samples: number[] = [];
  private readonly timer: NodeJS.Timeout;
  constructor(private readonly pid: number | undefined, everyMs = 500) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }
  private sample(): void {
    const kb = rssKb(this.pid);
    if (kb !== undefined) this.samples.push(kb);
  }
  stop(): RssFigures {
    clearInterval(this.timer);
    this.sample();
    const mb = (kb: number | undefined) => (kb === undefined ? Number.NaN : round(kb / 1024, 1));
    return {
      startMb: mb(this.samples[0]),
      maxMb: mb(this.samples.length ? Math.max(...this.samples) : undefined),
      endMb: mb(this.samples[this.samples.length - 1]),
      samples: this.samples.length,
      seriesMb: this.samples.map((kb) => mb(kb)),
    };
  }
}

export function round(value: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Human formatting: thousands separators, fixed decimals, "—" for missing. */
export function fmt(value: number | string | undefined, digits = 0): string {
  if (value === undefined) return '—';
  if (typeof value === 'string') return value;
  if (!Number.isFinite(value)) return '—';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Prints a boxed, column-aligned table. Numbers-looking cells are right-aligned. */
export function printTable(title: string, headers: string[], rows: string[][]): void {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const numeric = /^[-+]?[\d,.]+( ?(ms|MB|%|×|s|\/s))?$|^—$/;
  const line = (cells: string[]) =>
    '│ ' + cells.map((c, i) => (numeric.test(c) && i > 0 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' │ ') + ' │';
  const rule = (l: string, m: string, r: string) => l + widths.map((w) => '─'.repeat(w + 2)).join(m) + r;
  console.log(`\n${title}`);
  console.log(rule('┌', '┬', '┐'));
  console.log(line(headers));
  console.log(rule('├', '┼', '┤'));
  for (const row of rows) console.log(line(row));
  console.log(rule('└', '┴', '┘'));
}

export function log(message: string): void {
  const t = new Date().toISOString().slice(11, 19);
  console.log(`[${t}] ${message}`);
}

export function median(values: number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}
