/** Child processes (server, receiver, bare baseline), admin API calls and PostgreSQL schema handling. */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { DEFAULT_POSTGRES_URL, LOG_DIR, ROOT, freePort, sleep, type DbKind } from './lib.js';

export const ADMIN_TOKEN = `bench-admin-${randomBytes(8).toString('hex')}`;
const SECRET_KEY = randomBytes(32).toString('hex');

const children = new Set<ChildProcess>();

function logTail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Spawns `node --import tsx <script>` (or plain `node` for compiled JavaScript); output goes to .bench/logs/<name>.log. */
function spawnNode(name: string, script: string, args: string[], env: NodeJS.ProcessEnv, ipc: boolean, loader = true): { child: ChildProcess; logFile: string } {
  mkdirSync(LOG_DIR, { recursive: true });
  const logFile = path.join(LOG_DIR, `${name}.log`);
  const fd = openSync(logFile, 'w');
  const child = spawn(process.execPath, [...(loader ? ['--import', 'tsx'] : []), script, ...args], {
    cwd: ROOT,
    env,
    stdio: ipc ? ['ignore', fd, fd, 'ipc'] : ['ignore', fd, fd],
  });
  closeSync(fd);
  children.add(child);
  child.once('exit', () => children.delete(child));
  return { child, logFile };
}

/** A child started elsewhere (scenario 8's `m2m dev`) that the end of the bench and Ctrl-C must stop too. */
export function trackChild(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
export async function stopChild(child: ChildProcess | undefined, graceMs = 15_000): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export async function stopAllChildren(): Promise<void> {
  await Promise.all([...children].map((child) => stopChild(child, 5_000)));
}

/** Synchronous last resort (signal handlers): SIGKILL every child this bench started. */
export function killAllChildren(): void {
  for (const child of children) child.kill('SIGKILL');
}

function baseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['DATABASE_URL', 'DATABASE_SCHEMA', 'DATA_DIR', 'PORT', 'HOST', 'MCP_ENABLED']) delete env[name];
  return env;
}

export interface Server {
  name: string;
  /** Milliseconds from spawn to the first 200 of /readyz (or of /metrics for a worker). */
  readyMs: number;
  child: ChildProcess;
  pid: number | undefined;
  baseUrl: string;
  logFile: string;
}

export interface StartOptions {
  /** Run the build (`node dist/server/main.js`, as `npm start` does) instead of the sources through tsx. */
  compiled?: boolean;
}

/**
 * Starts the real server (`src/main.ts --role <role>`) on a free port of 127.0.0.1 and waits for /readyz.
 * (With --role all the workers start just before the port opens.) A worker has no API port: it is given a
 * METRICS_PORT, and is ready once that answers.
 */
export async function startServer(
  name: string,
  role: 'api' | 'all' | 'worker',
  dbEnv: Record<string, string>,
  extraEnv: Record<string, string> = {},
  options: StartOptions = {},
): Promise<Server> {
  const port = await freePort();
  const metricsPort = role === 'worker' ? String(await freePort()) : undefined;
  const env = {
    ...baseEnv(),
    ADMIN_TOKEN,
    SECRET_KEY,
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    RATE_LIMIT_RPS: '1000000',
    RATE_LIMIT_BURST: '1000000',
    UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true',
    ...dbEnv,
    ...(metricsPort ? { METRICS_PORT: metricsPort } : {}),
    ...extraEnv,
  };
  if (options.compiled && !existsSync(path.join(ROOT, 'dist/server/main.js'))) throw new Error('dist/server/main.js is missing: run npm run build first');
  const started = performance.now();
  const { child, logFile } = options.compiled
    ? spawnNode(name, 'dist/server/main.js', ['--role', role], env, false, false)
    : spawnNode(name, 'src/main.ts', ['--role', role], env, false);
  const baseUrl = `http://127.0.0.1:${port}`;
  const readyUrl = metricsPort ? `http://127.0.0.1:${env.METRICS_PORT}/metrics` : `${baseUrl}/readyz`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${logTail(logFile)}`);
    }
    try {
      const response = await fetch(readyUrl, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stopChild(child, 2_000);
      throw new Error(`${name} not ready after 90 s:\n${logTail(logFile)}`);
    }
    await sleep(20);
  }
  return { name, readyMs: Math.round(performance.now() - started), child, pid: child.pid, baseUrl, logFile };
}

/** A node script under bench/ that reports `{ port }` over IPC once it listens. */
async function startIpcChild<M extends { port: number } = { port: number }>(
  name: string,
  script: string,
  setup?: unknown,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; port: number; message: M }> {
  const { child, logFile } = spawnNode(name, script, [], { ...baseEnv(), ...env }, true);
  const message = await new Promise<M>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 30 s:\n${logTail(logFile)}`)), 30_000);
    child.once('message', (reply: M) => {
      clearTimeout(timer);
      resolve(reply);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}):\n${logTail(logFile)}`));
    });
    if (setup !== undefined) child.send(setup as object);
  });
  return { child, port: message.port, message };
}

export interface ReceiverStats {
  count: number;
  unique: number;
  duplicates: number;
  first: number;
  last: number;
}

/** The receiver on `host` (a loopback address: 127.0.0.2 is another destination host than 127.0.0.1 for the worker's per-host caps). */
export async function startReceiver(name: string, host = '127.0.0.1') {
  const { child, port } = await startIpcChild(name, 'bench/receiver.ts', undefined, { RECEIVER_HOST: host });
  const base = `http://${host}:${port}`;
  const get = async <T>(url: string, method = 'GET'): Promise<T> => {
    const response = await fetch(`${base}${url}`, { method, signal: AbortSignal.timeout(30_000) });
    if (!response.ok) throw new Error(`receiver ${url} → ${response.status}`);
    return (await response.json()) as T;
  };
  return {
    child,
    url: `${base}/hook`,
    stats: () => get<ReceiverStats>('/stats'),
    arrivals: () => get<Record<string, [number, number | null, string | null]>>('/arrivals'),
    reset: () => get<unknown>('/reset', 'POST'),
  };
}

export async function startBare(name: string, body: string, contentType: string): Promise<{ child: ChildProcess; base: string }> {
  const { child, port } = await startIpcChild(name, 'bench/bare-server.ts', { body, contentType });
  return { child, base: `http://127.0.0.1:${port}` };
}

/** The minimal reference route (bench/minimal-server.ts) on its own database. */
export async function startMinimal(name: string, dbEnv: Record<string, string>): Promise<{ child: ChildProcess; url: string; key: string }> {
  const { child, port, message } = await startIpcChild<{ port: number; key: string; path: string }>(name, 'bench/minimal-server.ts', { dbEnv });
  return { child, url: `http://127.0.0.1:${port}${message.path}`, key: message.key };
}

/** One JSON call; throws unless 2xx. */
export async function call<T>(base: string, method: string, url: string, options: { token?: string; body?: unknown } = {}): Promise<T> {
  const response = await fetch(`${base}${url}`, {
    method,
    headers: {
      authorization: `Bearer ${options.token ?? ADMIN_TOKEN}`,
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${url} → ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

export interface Seeded {
  tenantId: string;
  key: string;
  subscriptionId: string;
}

/** Tenant, key (webhooks:write + conversations:read) and one message.created subscription to `hookUrl`. */
export async function seedSubscription(base: string, hookUrl: string): Promise<Seeded> {
  const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name: 'Bench Hotel' } });
  const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, {
    body: { name: 'bench', scopes: ['webhooks:write', 'conversations:read'] },
  });
  const { subscriptionId } = await call<{ subscriptionId: string }>(base, 'POST', '/m2m/v1/webhooks', {
    token: key,
    body: { url: hookUrl, events: ['message.created'], description: 'bench' },
  });
  return { tenantId, key, subscriptionId };
}

export function emitBody(seq: number): { type: 'message.created'; data: Record<string, unknown> } {
  return { type: 'message.created', data: { conversationId: 'cnv_bench', messageId: `msg_bench_${seq}`, text: 'Hello, is the room with the sea view still free on Friday?' } };
}

// ---- PostgreSQL ----

/** DATABASE_URL if set, else the default local URL when PostgreSQL answers there. */
export async function detectPostgres(): Promise<string | undefined> {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  const client = new pg.Client({ connectionString: DEFAULT_POSTGRES_URL, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return DEFAULT_POSTGRES_URL;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const schemas = new Map<string, string>();

/** A new schema name for one server's data; remembered so dropSchemas() removes it. */
export function newSchema(url: string): string {
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  schemas.set(schema, url);
  return schema;
}

export async function withPg<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function dropSchemas(): Promise<string[]> {
  const dropped: string[] = [];
  for (const [schema, url] of schemas) {
    try {
      await withPg(url, (client) => client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`));
      dropped.push(schema);
      schemas.delete(schema);
    } catch (error) {
      console.error(`could not drop schema ${schema}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return dropped;
}

export function dbLabel(db: DbKind): string {
  return db === 'postgres' ? 'PostgreSQL' : 'PGlite';
}
