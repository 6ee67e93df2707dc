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
  /** Connections of the pool (PostgreSQL); undefined on PGlite, which has a single connection. */
  poolUse(): PoolUse | undefined;
  /** The name under which `pg_notify` in a statement wakes listeners of `channel` on every node (PostgreSQL). */
  notifyName(channel: string): string;
  /** Wakes this process's listeners of `channel` at once: after a statement that committed on its own and notified. */
  wake(channel: string): void;
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
