// The embedded driver (PGlite): one connection in this process, loaded only when used.
import { AsyncLocalStorage } from 'node:async_hooks';
import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import type { PGlite } from '@electric-sql/pglite';
import type { Db, Tx } from './interface.js';
import { BUILT_TEMPLATE_DIR, seedFromTemplate } from './pglite-template.js';
import { LocalSignals, TxHandle, finishCommit, notifyChannelName } from './tx-handle.js';

/**
 * Marks code running inside a transaction callback. Using the Db itself there (instead of the tx) would
 * run outside the transaction on PostgreSQL and deadlock on PGlite's single connection, so it throws.
 * Marked and checked on PGlite only, where the mistake hangs and where the tests run by default: on Node 20 an
 * AsyncLocalStorage in use gives every promise of the process an async hook, which a PostgreSQL deployment
 * need not carry for a mistake that does not hang there.
 */
const insideTransaction = new AsyncLocalStorage<boolean>();

function assertNotInTransaction(): void {
  if (insideTransaction.getStore()) throw new Error('database used directly inside a transaction callback: use the transaction (tx) instead');
}

/**
 * PGlite runs each statement synchronously on this thread, and its own lock hands over to the next waiter in a
 * microtask: a queue of waiting requests would run statement after statement while Node reads no socket (a
 * health probe waited behind 64 list requests' queries). So statements and transactions queue here instead,
 * and once the queue has kept the thread for TURN_MS the next one starts only after the event loop has taken
 * in I/O. It yields only after a turn, not before every statement: a statement that finds the thread
 * free runs at once (docs/decisions.md, "PGlite takes turns").
 */
const TURN_MS = 10;
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  private readonly signals = new LocalSignals();
  private turn: Promise<unknown> = Promise.resolve();
  private turnStarted = performance.now();
  constructor(private readonly lite: PGlite, readonly schema: string) {}

  /** Runs `work` after every statement queued before it, letting the event loop in once the queue has run TURN_MS. */
  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = this.turn.then(() => this.yieldIfDue()).then(work);
    this.turn = run.catch(() => undefined);
    return run;
  }

  private async yieldIfDue(): Promise<void> {
    if (performance.now() - this.turnStarted < TURN_MS) return;
    await yieldToEventLoop();
    this.turnStarted = performance.now();
  }

  async query<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    assertNotInTransaction();
    const result = await this.inTurn(() => this.lite.query<T>(sql, params as unknown[] | undefined));
    return result.rows;
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    assertNotInTransaction();
    let handle: TxHandle | undefined;
    const result = await this.inTurn(() => this.lite.transaction(async (inner) => {
      handle = new TxHandle(
        async <R>(sql: string, params?: readonly unknown[]) => (await inner.query<R>(sql, params as unknown[] | undefined)).rows,
        async (sql: string) => {
          await inner.exec(sql);
        },
      );
      const current = handle;
      return insideTransaction.run(true, () => fn(current));
    }));
    if (handle) finishCommit(handle, this.signals);
    return result;
  }

  /** PGlite has one process: its listeners are woken by `wake`, the name only keeps SQL the same on both drivers. */
  notifyName(channel: string): string {
    return notifyChannelName(this.schema, channel);
  }

  wake(channel: string): void {
    this.signals.emit(channel);
  }

  async listen(channel: string, onWake: () => void): Promise<() => void> {
    return this.signals.on(channel, onWake);
  }

  poolUse(): undefined {
    return undefined;
  }

  async close(): Promise<void> {
    await this.lite.close();
  }
}

/**
 * PGlite's shared buffers live in the process's own memory (its WebAssembly heap): PostgreSQL's default would
 * stay with an embedded server once touched. The database files are read through the kernel's page cache
 * anyway, so a small buffer pool suits an embedded server.
 */
const PGLITE_SETTINGS = ['shared_buffers=16MB'];

/** The embedded driver: PGlite in this process, on disk under `dataDir` (seeded from the template) or in memory. */
export async function openPglite(options: { dataDir: string; schema: string; templateDir?: string }): Promise<Db> {
  const { schema } = options;
  const memory = options.dataDir.startsWith('memory://');
  let dataDir: string | undefined;
  if (!memory) {
    dataDir = path.resolve(options.dataDir, 'pgdata');
    mkdirSync(dataDir, { recursive: true });
  }
  // The engine is PostgreSQL compiled to WebAssembly. By default V8 compiles it at once (Liftoff) and then its hot
  // functions again in the background (TurboFan), which competes for the CPU with the start and the first work of a
  // node; so Liftoff alone compiles it (docs/decisions.md, "Compiled start"). Set before the module compiles.
  setFlagsFromString('--liftoff-only');
  // Loaded only when used: a PostgreSQL deployment should not carry the embedded engine's memory.
  const [{ PGlite }, { pg_trgm }, { btree_gin }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('@electric-sql/pglite/contrib/pg_trgm'),
    import('@electric-sql/pglite/contrib/btree_gin'),
    dataDir ? seedFromTemplate(dataDir, options.templateDir ?? BUILT_TEMPLATE_DIR) : undefined,
  ]);
  const lite = await PGlite.create(dataDir, {
    parsers: { 20: (value: string) => Number(value) },
    extensions: { pg_trgm, btree_gin },
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((setting) => ['-c', setting])],
  });
  if (schema !== 'public') {
    await lite.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}; SET search_path TO ${schema}, public`);
  }
  return new PgliteDb(lite, schema);
}
