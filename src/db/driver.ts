import { AsyncLocalStorage } from 'node:async_hooks';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { epochMsOfTimestamptz } from './timestamp.js';
import { BUILT_TEMPLATE_DIR, seedFromTemplate } from './pglite-template.js';

/** Anything that runs SQL: the database itself or an open transaction. */
export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
}

/** A transaction: queries run inside it; notifications and callbacks fire only once it commits. */
export interface Tx extends Queryable {
  /** Wake listeners of `channel` (this process and, on PostgreSQL, every node) when the transaction commits. */
  notify(channel: string): void;
  /** Run `fn` after a successful commit (never on rollback). */
  afterCommit(fn: () => void): void;
  /** Run a script of several statements (migrations). */
  exec(sql: string): Promise<void>;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Schema the tables live in (for advisory lock keys and channel names). */
  readonly schema: string;
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * A hot statement whose best plan does not depend on its parameter values (the webhook claim, the unsearched
   * inbox list): on PostgreSQL it runs with a generic plan kept per connection, skipping the planning every
   * other statement pays per call (for these, more than their execution: docs/decisions.md, "Measured costs").
   */
  queryCachedPlan<T = Record<string, unknown>>(sql: string, params: readonly unknown[]): Promise<T[]>;
  /** Connections of the main pool (PostgreSQL); undefined on PGlite, which has a single connection. */
  poolUse(): PoolUse | undefined;
  /** Subscribe to wake-ups on `channel`; returns an unsubscribe function. */
  listen(channel: string, onWake: () => void): Promise<() => void>;
  close(): Promise<void>;
}

export interface PoolUse {
  /** Open connections, idle ones among them, and queries waiting for a connection. */
  total: number;
  idle: number;
  waiting: number;
  max: number;
}

export interface DbOptions {
  databaseUrl?: string;
  schema?: string;
  dataDir: string;
  poolSize?: number;
  /** PGlite: a migrated database copied into an empty data directory instead of running initdb (see pglite-template.ts). */
  templateDir?: string;
}

// int8 (count(*), bigserial) as JS numbers on both drivers: our counters stay far below 2^53.
pg.types.setTypeParser(20, (value: string) => Number(value));
// timestamptz: the common ISO form parsed by hand (a page of rows carries dozens), anything else as before.
const parseTimestamptzSlowly = pg.types.getTypeParser(1184, 'text');
pg.types.setTypeParser(1184, (value: string) => {
  const ms = epochMsOfTimestamptz(value);
  return ms === undefined ? parseTimestamptzSlowly(value) : new Date(ms);
});

/**
 * Marks code running inside a transaction callback. Using the Db itself there (instead of the tx) would
 * run outside the transaction on PostgreSQL and deadlock on PGlite's single connection, so it throws.
 * Marked and checked on PGlite only, where the mistake hangs and where the tests run by default: on Node 20 an
 * AsyncLocalStorage in use gives every promise of the process an async hook, which on PostgreSQL cost the
 * webhook worker and an emitting process about a tenth of their CPU and the worker a fifth of the garbage
 * it kept past young-generation GCs.
 */
const insideTransaction = new AsyncLocalStorage<boolean>();

function assertNotInTransaction(): void {
  if (insideTransaction.getStore()) throw new Error('database used directly inside a transaction callback: use the transaction (tx) instead');
}

class TxHandle implements Tx {
  readonly channels = new Set<string>();
  readonly callbacks: Array<() => void> = [];
  constructor(
    private readonly run: Queryable['query'],
    private readonly script: (sql: string) => Promise<void>,
  ) {}
  exec(sql: string): Promise<void> {
    return this.script(sql);
  }
  query<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return this.run<T>(sql, params);
  }
  notify(channel: string): void {
    this.channels.add(channel);
  }
  afterCommit(fn: () => void): void {
    this.callbacks.push(fn);
  }
}

/** Local wake-ups: the in-process signal that PGlite relies on and PostgreSQL uses as a shortcut. */
class LocalSignals {
  private readonly emitter = new EventEmitter().setMaxListeners(0);
  emit(channel: string): void {
    this.emitter.emit(channel);
  }
  on(channel: string, fn: () => void): () => void {
    this.emitter.on(channel, fn);
    return () => this.emitter.off(channel, fn);
  }
}

/** A string as a SQL literal (for the few statements that cannot take parameters). */
function sqlLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

function finishCommit(tx: TxHandle, signals: LocalSignals): void {
  for (const channel of tx.channels) signals.emit(channel);
  for (const fn of tx.callbacks) {
    try {
      fn();
    } catch {
      // after-commit hooks are best-effort wake-ups; the data is already committed
    }
  }
}

/**
 * Parameterised statements run as named prepared statements (one per SQL text and connection), so PostgreSQL
 * parses and analyses each text once per connection instead of on every call: about a third of a hot list
 * query's server time. Plans stay per call (`plan_cache_mode=force_custom_plan` on the pool's connections), so
 * a skewed parameter (a rare or a common search pattern) is planned for its value exactly as before.
 * Texts are bounded by the code's query builders; past `MAX_NAMED` distinct texts, new ones run unnamed.
 */
const MAX_NAMED = 500;
const statementNames = new Map<string, string>();

function statement(sql: string, params: readonly unknown[] | undefined): pg.QueryConfig {
  const values = params as unknown[] | undefined;
  if (!values) return { text: sql };
  let name = statementNames.get(sql);
  if (!name && statementNames.size < MAX_NAMED) {
    name = `s_${createHash('sha1').update(sql).digest('base64url')}`;
    statementNames.set(sql, name);
  }
  return { name, text: sql, values };
}

/**
 * Connections for queryCachedPlan. The unsearched inbox list runs there at API request rates (planning was
 * two thirds of its database time), besides the webhook claim; four kept a 16-connection load as fast as eight.
 */
const CACHED_PLAN_POOL_SIZE = 4;

/** Connection settings for our schema; `planCacheMode` is the session's `plan_cache_mode` (see `statement`). */
function connectionConfig(databaseUrl: string, schema: string, planCacheMode: 'force_custom_plan' | 'force_generic_plan'): pg.ClientConfig {
  return {
    connectionString: databaseUrl,
    // public stays on the path for extension objects (pg_trgm lives there); our tables are in `schema`.
    options: `-c plan_cache_mode=${planCacheMode}${schema === 'public' ? '' : ` -c search_path=${schema},public`}`,
  };
}

function newPool(config: pg.ClientConfig, max: number): pg.Pool {
  // A database that does not answer (blackholed, not refused) fails a checkout after 10 s (a 503) instead
  // of holding the request until the kernel gives up on the connection.
  const pool = new pg.Pool({ ...config, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000 });
  // Idle clients can error when the server restarts; the pool replaces them.
  pool.on('error', () => undefined);
  return pool;
}

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  private readonly signals = new LocalSignals();
  private listener: pg.Client | undefined;
  private readonly listened = new Set<string>();
  private closing = false;
  /** Connections whose prepared statements keep their generic plan (see queryCachedPlan); opened on first use. */
  private cachedPlanPool: pg.Pool | undefined;
  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly databaseUrl: string,
  ) {}

  async query<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    const result = await this.pool.query(statement(sql, params));
    return result.rows as T[];
  }

  poolUse(): PoolUse {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount, max: this.pool.options.max };
  }

  async queryCachedPlan<T>(sql: string, params: readonly unknown[]): Promise<T[]> {
    this.cachedPlanPool ??= newPool(connectionConfig(this.databaseUrl, this.schema, 'force_generic_plan'), CACHED_PLAN_POOL_SIZE);
    const result = await this.cachedPlanPool.query(statement(sql, params));
    return result.rows as T[];
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const tx = new TxHandle(
      async <R>(sql: string, params?: readonly unknown[]) => (await client.query(statement(sql, params))).rows as R[],
      async (sql: string) => {
        await client.query(sql);
      },
    );
    try {
      await client.query('BEGIN');
      const result = await fn(tx);
      // Notifications and COMMIT in one round trip (simple query protocol, several statements).
      const notifies = [...tx.channels].map((channel) => `SELECT pg_notify(${sqlLiteral(this.channelName(channel))}, '');`).join(' ');
      await client.query(`${notifies} COMMIT`);
      client.release();
      finishCommit(tx, this.signals);
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
      throw error;
    }
  }

  private channelName(channel: string): string {
    return `${this.schema}.${channel}`;
  }

  async listen(channel: string, onWake: () => void): Promise<() => void> {
    const off = this.signals.on(channel, onWake);
    const isNew = !this.listened.has(channel);
    this.listened.add(channel);
    if (!this.listener) {
      await this.connectListener();
    } else if (isNew) {
      await this.listener.query(this.listenSql(channel));
    }
    return off;
  }

  private listenSql(channel: string): string {
    return `LISTEN "${this.channelName(channel).replace(/"/g, '')}"`;
  }

  private async connectListener(): Promise<void> {
    const client = new pg.Client(connectionConfig(this.databaseUrl, this.schema, 'force_custom_plan'));
    this.listener = client;
    client.on('notification', (message) => {
      const prefix = `${this.schema}.`;
      if (message.channel.startsWith(prefix)) this.signals.emit(message.channel.slice(prefix.length));
    });
    client.on('error', () => this.listenerLost(client));
    client.on('end', () => this.listenerLost(client));
    try {
      await client.connect();
      for (const channel of this.listened) await client.query(this.listenSql(channel));
    } catch (error) {
      if (this.listener === client) this.listener = undefined;
      client.removeAllListeners('end');
      client.end().catch(() => undefined);
      throw error;
    }
  }

  /**
   * The LISTEN connection broke (server restart, network): notifications sent meanwhile are lost, so every
   * listener is woken once (workers poll, caches clear) and the connection is re-established with backoff.
   */
  private listenerLost(client: pg.Client): void {
    if (this.listener !== client || this.closing) return;
    this.listener = undefined;
    client.end().catch(() => undefined);
    for (const channel of this.listened) this.signals.emit(channel);
    const retry = (delayMs: number) => {
      const timer = setTimeout(() => {
        if (this.closing || this.listener) return;
        this.connectListener()
          .then(() => {
            for (const channel of this.listened) this.signals.emit(channel);
          })
          .catch(() => retry(Math.min(delayMs * 2, 30_000)));
      }, delayMs);
      timer.unref();
    };
    retry(500);
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.listener?.end().catch(() => undefined);
    await this.cachedPlanPool?.end();
    await this.pool.end();
  }
}

class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  private readonly signals = new LocalSignals();
  constructor(private readonly lite: PGlite, readonly schema: string) {}

  async query<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    assertNotInTransaction();
    const result = await this.lite.query<T>(sql, params as unknown[] | undefined);
    return result.rows;
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    assertNotInTransaction();
    let handle: TxHandle | undefined;
    const result = await this.lite.transaction(async (inner) => {
      handle = new TxHandle(
        async <R>(sql: string, params?: readonly unknown[]) => (await inner.query<R>(sql, params as unknown[] | undefined)).rows,
        async (sql: string) => {
          await inner.exec(sql);
        },
      );
      const current = handle;
      return insideTransaction.run(true, () => fn(current));
    });
    if (handle) finishCommit(handle, this.signals);
    return result;
  }

  async listen(channel: string, onWake: () => void): Promise<() => void> {
    return this.signals.on(channel, onWake);
  }

  queryCachedPlan<T>(sql: string, params: readonly unknown[]): Promise<T[]> {
    return this.query<T>(sql, params);
  }

  poolUse(): undefined {
    return undefined;
  }

  async close(): Promise<void> {
    await this.lite.close();
  }
}

/**
 * PGlite's shared buffers live in the process's own memory (its WebAssembly heap): PostgreSQL's default of
 * 128 MB was most of an idle embedded server's RSS once touched. The database files are read through the
 * kernel's page cache anyway, so 16 MB costs little speed at this scale (docs/decisions.md).
 */
const PGLITE_SETTINGS = ['shared_buffers=16MB'];

/** node-postgres (pooled) when a URL is given, embedded PGlite otherwise. */
export async function openDb(options: DbOptions): Promise<Db> {
  const schema = options.schema ?? 'public';
  if (options.databaseUrl) {
    const pool = newPool(connectionConfig(options.databaseUrl, schema, 'force_custom_plan'), options.poolSize ?? 20);
    if (schema !== 'public') await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    return new PostgresDb(pool, schema, options.databaseUrl);
  }
  const memory = options.dataDir.startsWith('memory://');
  let dataDir: string | undefined;
  if (!memory) {
    dataDir = path.resolve(options.dataDir, 'pgdata');
    mkdirSync(dataDir, { recursive: true });
  }
  // Loaded only when used: the embedded engine costs ~45 MB of RSS that a PostgreSQL deployment should not carry.
  const [{ PGlite }, { pg_trgm }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('@electric-sql/pglite/contrib/pg_trgm'),
    dataDir ? seedFromTemplate(dataDir, options.templateDir ?? BUILT_TEMPLATE_DIR) : undefined,
  ]);
  const lite = await PGlite.create(dataDir, {
    parsers: { 20: (value: string) => Number(value) },
    extensions: { pg_trgm },
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((setting) => ['-c', setting])],
  });
  if (schema !== 'public') {
    await lite.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}; SET search_path TO ${schema}, public`);
  }
  return new PgliteDb(lite, schema);
}
