// The PostgreSQL driver (node-postgres): prepared statements, the pool, transactions and LISTEN/NOTIFY.
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Db, PoolUse, Tx } from './interface.js';
import { epochMsOfTimestamptz } from './timestamp.js';
import { LocalSignals, TxHandle, finishCommit, notifyChannelName } from './tx-handle.js';

// int8 (count(*), bigserial) as JS numbers on both drivers: our counters stay far below 2^53.
pg.types.setTypeParser(20, (value: string) => Number(value));
// timestamptz: the ISO form PostgreSQL prints read by epochMsOfTimestamptz, anything else by node-postgres's parser.
const parseTimestamptzSlowly = pg.types.getTypeParser(1184, 'text');
pg.types.setTypeParser(1184, (value: string) => {
  const ms = epochMsOfTimestamptz(value);
  return ms === undefined ? parseTimestamptzSlowly(value) : new Date(ms);
});

/** A string as a SQL literal (for the few statements that cannot take parameters). */
function sqlLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/**
 * Parameterised statements run as named prepared statements, one per SQL text and connection: PostgreSQL parses
 * each text once per connection, and its plan cache (the server's `plan_cache_mode`, `auto` by default) keeps a
 * generic plan where one is as good as the custom ones (docs/decisions.md, "Prepared statements"). Texts come from
 * the code's query builders, so they are few; past MAX_NAMED distinct texts, new ones run unnamed.
 */
const MAX_NAMED = 500;
const statementNames = new Map<string, string>();

function statement(sql: string, params: readonly unknown[] | undefined): pg.QueryConfig {
  if (!params) return { text: sql };
  let name = statementNames.get(sql);
  if (!name && statementNames.size < MAX_NAMED) {
    name = `s_${createHash('sha1').update(sql).digest('base64url')}`;
    statementNames.set(sql, name);
  }
  return { name, text: sql, values: [...params] };
}

/** Connection settings for our schema: public stays on the path for extension objects (pg_trgm lives there). */
function connectionConfig(databaseUrl: string, schema: string): pg.ClientConfig {
  return schema === 'public' ? { connectionString: databaseUrl } : { connectionString: databaseUrl, options: `-c search_path=${schema},public` };
}

function newPool(config: pg.ClientConfig, max: number): pg.Pool {
  // A database that does not answer (blackholed, not refused) fails a checkout after 10 s (a 503) instead
  // of holding the request until the kernel gives up on the connection.
  const pool = new pg.Pool({ ...config, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000 });
  // Idle clients can error when the server restarts; the pool replaces them.
  pool.on('error', () => undefined);
  return pool;
}

/** The server process behind a connection (node-postgres sets it at connect; its types do not declare it). */
function backendPid(client: pg.PoolClient): number | undefined {
  const pid: unknown = Reflect.get(client, 'processID');
  return typeof pid === 'number' ? pid : undefined;
}

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  private readonly signals = new LocalSignals();
  /**
   * The server processes of this pool's connections. A notification one of them sent was already delivered in this
   * process when its statement committed (finishCommit, or the caller's wake): the listener skips it, so every
   * commit wakes this process's loops once, not twice.
   */
  private readonly ownBackends = new Set<number>();
  private listener: pg.Client | undefined;
  private readonly listened = new Set<string>();
  private closing = false;
  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly databaseUrl: string,
  ) {
    pool.on('connect', (client) => {
      const pid = backendPid(client);
      if (pid !== undefined) this.ownBackends.add(pid);
    });
    pool.on('remove', (client) => {
      const pid = backendPid(client);
      if (pid !== undefined) this.ownBackends.delete(pid);
    });
  }

  async query<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    const result = await this.pool.query(statement(sql, params));
    return result.rows as T[];
  }

  poolUse(): PoolUse {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount, max: this.pool.options.max };
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
      const notifies = [...tx.channels].map((channel) => `SELECT pg_notify(${sqlLiteral(this.notifyName(channel))}, '');`).join(' ');
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

  notifyName(channel: string): string {
    return notifyChannelName(this.schema, channel);
  }

  wake(channel: string): void {
    this.signals.emit(channel);
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
    return `LISTEN "${this.notifyName(channel).replace(/"/g, '')}"`;
  }

  private async connectListener(): Promise<void> {
    const client = new pg.Client(connectionConfig(this.databaseUrl, this.schema));
    this.listener = client;
    client.on('notification', (message) => {
      const prefix = `${this.schema}.`;
      if (this.ownBackends.has(message.processId)) return;
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
    await this.pool.end();
  }
}

/** The pooled node-postgres driver; the schema is created when missing. */
export async function openPostgres(databaseUrl: string, schema: string, poolSize: number): Promise<Db> {
  const pool = newPool(connectionConfig(databaseUrl, schema), poolSize);
  const db = new PostgresDb(pool, schema, databaseUrl);
  if (schema !== 'public') await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  return db;
}
