/**
 * Scenario `events` (PostgreSQL): the catch-up feed.
 * (a) `GET /m2m/v1/events?limit=200` with 1,000,000 events in the table (900,000 of the measured tenant's, written
 *     in 10 transactions, and 100,000 of another tenant): 16 readers each follow their own `nextCursor` chain from
 *     the start for 10 s (starting over when they reach the end), so pages come from every depth of the stream.
 * (b) a consumer of a third tenant follows `nextCursor` (polling every 20 ms when it has caught up) while 1,000
 *     events/s are committed by `emit()` in transactions of their own: lag = when the consumer read an event minus
 *     when its emit committed.
 * Targets: (a) p99 < 50 ms at 16 connections; (b) p99 lag < 1 s, nothing missing.
 */
import { Pool } from 'undici';
import { eventScope } from '../src/events/types.js';
import os from 'node:os';
import { CpuMeter, fmt, log, printTable, round, sleep, summarise } from './lib.js';
import { pacedEmit, sqlEmitter } from './emit.js';
import { call, emitBody, newSchema, startServer, stopChild, withPg, type Server } from './procs.js';

export interface EventsResult {
  seededEvents: number;
  seedSeconds: number;
  feed: { connections: number; seconds: number; requests: number; rps: number; p50Ms: number; p99Ms: number; maxMs: number; failures: number; eventsRead: number };
  /** % of one core during the feed readers' run (server, bench, postgres, other) and the 1-minute load average at its end. */
  feedCpuPct: Record<string, number>;
  feedLoadAverage: number;
  follow: { rate: number; emitted: number; read: number; missing: number; p50Ms: number; p99Ms: number; maxMs: number };
}

const round1 = (ms: number) => Math.round(ms * 10) / 10;

const TENANT_EVENTS = 900_000;
const OTHER_EVENTS = 100_000;
const BATCHES = 10;
const READERS = 16;
const READ_SECONDS = 10;
const FOLLOW_RATE = 1_000;
const FOLLOW_SECONDS = 10;

/** Copies of one real event (same body, its own id), `count` of them in one transaction. */
const COPY_EVENT = `
  INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at)
  SELECT $2::text || i, e.tenant_id, e.type, e.occurred_at, replace(e.body, e.id, $2::text || i), e.created_at
  FROM webhook_events e, generate_series(1, $3::int) AS i
  WHERE e.id = $1`;

async function tenantWithKey(base: string, name: string): Promise<{ tenantId: string; key: string }> {
  const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name } });
  const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'feed', scopes: [eventScope('message.created')] } });
  return { tenantId, key };
}

async function emitOne(base: string, tenantId: string): Promise<string> {
  const { eventId } = await call<{ eventId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/webhook-events`, { body: emitBody(0) });
  return eventId;
}

interface Page {
  events: Array<{ eventId: string }>;
  nextCursor: string;
}

async function page(pool: Pool, key: string, cursor: string | undefined): Promise<{ status: number; body: Page | undefined }> {
  const response = await pool.request({
    method: 'GET',
    path: `/m2m/v1/events?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    headers: { authorization: `Bearer ${key}` },
  });
  const text = await response.body.text();
  return { status: response.statusCode, body: response.statusCode === 200 ? (JSON.parse(text) as Page) : undefined };
}

async function readFeed(base: string, key: string) {
  const pool = new Pool(base, { connections: READERS, keepAliveTimeout: 30_000 });
  const latencies: number[] = [];
  let failures = 0;
  let eventsRead = 0;
  const end = Date.now() + READ_SECONDS * 1000;
  const reader = async () => {
    let cursor: string | undefined;
    while (Date.now() < end) {
      const started = performance.now();
      const { status, body } = await page(pool, key, cursor);
      latencies.push(performance.now() - started);
      if (!body) {
        failures += 1;
        log(`events: GET /events answered ${status}`);
        continue;
      }
      eventsRead += body.events.length;
      cursor = body.events.length < 200 ? undefined : body.nextCursor;
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: READERS }, reader));
  const seconds = (Date.now() - started) / 1000;
  await pool.destroy();
  const s = summarise(latencies);
  return { connections: READERS, seconds, requests: latencies.length, rps: Math.round(latencies.length / seconds), p50Ms: round1(s.p50), p99Ms: round1(s.p99), maxMs: round1(s.max), failures, eventsRead };
}

async function follow(base: string, key: string, postgresUrl: string, schema: string, tenantId: string) {
  const pool = new Pool(base, { connections: 1, keepAliveTimeout: 30_000 });
  const readAt = new Map<string, number>();
  let cursor = (await page(pool, key, undefined)).body?.nextCursor;
  let emitting = true;
  const consumer = (async () => {
    let idleAfterEmits = 0;
    while (emitting || idleAfterEmits < 50) {
      const { body } = await page(pool, key, cursor);
      if (!body) continue;
      const now = Date.now();
      for (const event of body.events) if (!readAt.has(event.eventId)) readAt.set(event.eventId, now);
      cursor = body.nextCursor;
      if (body.events.length < 200) {
        if (!emitting) idleAfterEmits += 1;
        await sleep(20);
      }
    }
  })();
  const emitted = await pacedEmit(await sqlEmitter(postgresUrl, schema, tenantId), FOLLOW_RATE, FOLLOW_SECONDS);
  emitting = false;
  await consumer;
  await pool.destroy();
  const lags: number[] = [];
  let missing = 0;
  for (const record of emitted.records) {
    const at = readAt.get(record.eventId);
    if (at === undefined) missing += 1;
    else lags.push(Math.max(0, at - record.doneAt));
  }
  const s = summarise(lags);
  return { rate: FOLLOW_RATE, emitted: emitted.records.length, read: readAt.size, missing, p50Ms: round1(s.p50), p99Ms: round1(s.p99), maxMs: round1(s.max) };
}

export async function runEvents(postgresUrl: string): Promise<EventsResult> {
  const schema = newSchema(postgresUrl);
  let server: Server | undefined;
  try {
    server = await startServer('events', 'api', { DATABASE_URL: postgresUrl, DATABASE_SCHEMA: schema });
    const measured = await tenantWithKey(server.baseUrl, 'Feed Hotel');
    const other = await tenantWithKey(server.baseUrl, 'Other Hotel');
    const templates = { measured: await emitOne(server.baseUrl, measured.tenantId), other: await emitOne(server.baseUrl, other.tenantId) };
    log(`events: seeding ${fmt(TENANT_EVENTS + OTHER_EVENTS)} events`);
    const seedStart = Date.now();
    await withPg(postgresUrl, async (client) => {
      await client.query(`SET search_path TO ${schema}, public`);
      for (let batch = 0; batch < BATCHES; batch += 1) {
        await client.query(COPY_EVENT, [templates.measured, `evt_feed_${batch}_`, TENANT_EVENTS / BATCHES]);
        await client.query(COPY_EVENT, [templates.other, `evt_other_${batch}_`, OTHER_EVENTS / BATCHES]);
      }
      await client.query('VACUUM ANALYZE webhook_events');
    });
    const seedSeconds = (Date.now() - seedStart) / 1000;
    log(`events: seeded in ${fmt(seedSeconds, 1)} s; ${READERS} readers follow their cursors for ${READ_SECONDS} s`);
    const cpu = new CpuMeter({ server: server.pid, bench: process.pid }, true);
    const feed = await readFeed(server.baseUrl, measured.key);
    const feedCpuPct = cpu.stop();
    const feedLoadAverage = round(os.loadavg()[0], 2);
    log(
      `events: GET /events?limit=200 ${fmt(feed.rps)} req/s, p50 ${feed.p50Ms} ms, p99 ${feed.p99Ms} ms, ${feed.failures} failures; CPU % server ${feedCpuPct.server}, bench ${feedCpuPct.bench}, pg ${feedCpuPct.postgres}, other ${feedCpuPct.other}; load average ${feedLoadAverage}`,
    );
    const follower = await tenantWithKey(server.baseUrl, 'Follower Hotel');
    log(`events: a consumer follows nextCursor while ${fmt(FOLLOW_RATE)} events/s are emitted for ${FOLLOW_SECONDS} s`);
    const followed = await follow(server.baseUrl, follower.key, postgresUrl, schema, follower.tenantId);
    log(`events: lag p50 ${followed.p50Ms} ms, p99 ${followed.p99Ms} ms; ${followed.missing} missing`);
    return { seededEvents: TENANT_EVENTS + OTHER_EVENTS + 2, seedSeconds, feed, feedCpuPct, feedLoadAverage, follow: followed };
  } finally {
    await stopChild(server?.child);
  }
}

export function printEvents(result: EventsResult | undefined): void {
  if (!result) return;
  const { feed, follow: f } = result;
  printTable(`Scenario 9 — the event feed (PostgreSQL, ${fmt(result.seededEvents)} events in the table)`, ['', 'figure', 'target'], [
    [`GET /events?limit=200, ${feed.connections} readers following their cursors`, `${fmt(feed.rps)} req/s; p50 ${feed.p50Ms} ms, p99 ${feed.p99Ms} ms, max ${feed.maxMs} ms; ${fmt(feed.eventsRead)} events read; ${feed.failures} failures`, 'p99 < 50 ms'],
    [
      '… CPU % server / bench / pg / other; load average',
      `${fmt(result.feedCpuPct.server)} / ${fmt(result.feedCpuPct.bench)} / ${fmt(result.feedCpuPct.postgres)} / ${fmt(result.feedCpuPct.other)}; ${fmt(result.feedLoadAverage, 2)}`,
      '',
    ],
    [`consumer lag behind ${fmt(f.rate)} emits/s`, `p50 ${f.p50Ms} ms, p99 ${f.p99Ms} ms, max ${f.maxMs} ms; ${fmt(f.read)} of ${fmt(f.emitted)} read, ${f.missing} missing`, 'p99 < 1 s, none missing'],
  ]);
}
