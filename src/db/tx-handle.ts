// What both drivers share: the transaction handle given to callbacks and the in-process wake-up signal.
import { EventEmitter } from 'node:events';
import type { Queryable, Tx } from './interface.js';

export class TxHandle implements Tx {
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
export class LocalSignals {
  private readonly emitter = new EventEmitter().setMaxListeners(0);
  emit(channel: string): void {
    this.emitter.emit(channel);
  }
  on(channel: string, fn: () => void): () => void {
    this.emitter.on(channel, fn);
    return () => this.emitter.off(channel, fn);
  }
}

export function finishCommit(tx: TxHandle, signals: LocalSignals): void {
  for (const channel of tx.channels) signals.emit(channel);
  for (const fn of tx.callbacks) {
    try {
      fn();
    } catch {
      // after-commit hooks are best-effort wake-ups; the data is already committed
    }
  }
}

/** The `pg_notify` channel of a wake-up channel: per schema, so that databases sharing a server do not wake each other. */
export function notifyChannelName(schema: string, channel: string): string {
  return `${schema}.${channel}`;
}
