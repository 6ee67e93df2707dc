/**
 * The latency phase's load: events emitted at a fixed rate. On PostgreSQL by the domain's own `emit()` in
 * transactions of their own, from this process (what a state change in the api does: the outbox row and its
 * fan-out committed, then NOTIFY); on PGlite, which one process owns, through the admin route.
 */
import { Pool } from 'undici';
import { openDb, type Db } from '../src/db/driver.js';
import { emitUnchecked } from '../src/webhooks/events.js';
import { sleep } from './lib.js';
import { ADMIN_TOKEN, emitBody } from './procs.js';

/** Commits one event and resolves with its id once committed. */
export interface Emitter {
  emit(seq: number): Promise<string>;
  close(): Promise<void>;
}

/** A refused emit (its reason is reported as is). */
class EmitFailure extends Error {}

/** The admin route (`POST /admin/v1/tenants/{id}/webhook-events`) over keep-alive connections. */
export function routeEmitter(base: string, tenantId: string): Emitter {
  const pool = new Pool(base, { connections: 32, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 10_000, bodyTimeout: 10_000 });
  return {
    async emit(seq) {
      const response = await pool.request({
        method: 'POST',
        path: `/admin/v1/tenants/${tenantId}/webhook-events`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(emitBody(seq)),
      });
      const text = await response.body.text();
      if (response.statusCode !== 201) throw new EmitFailure(`HTTP ${response.statusCode}`);
      return (JSON.parse(text) as { eventId: string }).eventId;
    },
    close: () => pool.destroy(),
  };
}

/** `emit()` in its own transaction on a pool of 32 connections to the server's database; several tenants take turns. */
export async function sqlEmitter(databaseUrl: string, schema: string, tenantId: string | readonly string[]): Promise<Emitter> {
  const db: Db = await openDb({ databaseUrl, schema, dataDir: '', poolSize: 32 });
  const tenants = typeof tenantId === 'string' ? [tenantId] : tenantId;
  return {
    async emit(seq) {
      const { data } = emitBody(seq);
      const tenant = tenants[seq % tenants.length];
      const event = await db.transaction((tx) => emitUnchecked(tx, new Date(), tenant, 'message.created', data));
      return event.eventId;
    },
    close: () => db.close(),
  };
}

/** Emits `rate` events/s for `seconds` (or until `stop()` says so); bounded in count and time. */
export async function pacedEmit(emitter: Emitter, rate: number, seconds: number, stop: () => boolean = () => false) {
  const total = Math.round(rate * seconds);
  const records: Array<{ eventId: string; sentAt: number; doneAt: number }> = [];
  let failures = 0;
  const failureReasons: Record<string, number> = {};
  const fail = (reason: string) => {
    failures += 1;
    failureReasons[reason] = (failureReasons[reason] ?? 0) + 1;
  };
  let attempted = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();
  const emitOne = async (seq: number) => {
    const sentAt = Date.now();
    try {
      const eventId = await emitter.emit(seq);
      records.push({ eventId, sentAt, doneAt: Date.now() });
    } catch (error) {
      if (error instanceof EmitFailure) return fail(error.message);
      const code = (error as { code?: string }).code ?? (error instanceof Error ? error.name : 'error');
      fail(code === 'UND_ERR_DESTROYED' ? 'no answer when the loop ended' : code);
    }
  };
  const start = Date.now();
  const hardStop = start + seconds * 1000 + 2_000;
  try {
    while (attempted < total && Date.now() < hardStop && !stop()) {
      const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * rate) + 1);
      while (attempted < due && inFlight < 512) {
        inFlight += 1;
        const p = emitOne(attempted).finally(() => {
          inFlight -= 1;
          pending.delete(p);
        });
        pending.add(p);
        attempted += 1;
      }
      await sleep(2);
    }
    await Promise.race([Promise.allSettled([...pending]), sleep(15_000)]);
  } finally {
    await emitter.close();
  }
  return { records, failures, failureReasons, attempted, start };
}
