/**
 * Conversation search scenario: `GET /m2m/v1/conversations?contactQuery=…` for a tenant with 100,000
 * conversations (plus 10 other tenants sharing the tables and the trigram index), at 16 connections, against a
 * bare node:http server sending the same bytes as the first query.
 *
 * World: tenants, channels (WhatsApp + Instagram), an API key (`conversations:read`) and a few real inbound
 * messages through the admin API; then contacts (with the `search_text` the app would write), conversations
 * and one message per conversation by direct SQL (`INSERT … SELECT generate_series`), then `VACUUM ANALYZE`
 * (what autovacuum would have done on a live system: statistics, visibility map, GIN pending list merged).
 * Then the route's two queries (page + inbox counts) run under `EXPLAIN (ANALYZE, BUFFERS)` on the seeded data,
 * through the repository's own SQL, one at a time (the database's share of a request, without load).
 *
 * `runConversations()` is what `npm run bench` calls (`--only conversations`).
 */
import autocannon from 'autocannon';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb } from '../src/db/driver.js';
import { searchText } from '../src/conversations/repo.js';
import { inboxSearchRepo } from '../src/conversations/search-repo.js';
import type { ListFilter } from '../src/conversations/search-sql.js';
import { SEARCH_COUNT_CAP, contactSearch } from '../src/conversations/service.js';
import type { Timing } from './api.js';
import { CpuMeter, fmt, log, median, printTable, round, sleep, type DbKind } from './lib.js';
import { call, newSchema, startBare, startServer, stopChild, withPg, type Server } from './procs.js';

export interface ConversationPlan {
  /** Conversations (one contact each) of the measured tenant. */
  measured: number;
  /** Other tenants, each with `perOther` conversations in the same tables. */
  otherTenants: number;
  perOther: number;
}

/**
 * 100,000 for the measured tenant on both databases (PGlite seeds it in about half a minute here); the other
 * tenants get 10,000 each, except on PGlite with --quick (2,000 each, to keep the seeding short).
 */
export function conversationPlan(db: DbKind, quick: boolean): ConversationPlan {
  if (db === 'postgres') return { measured: 100_000, otherTenants: 10, perOther: 10_000 };
  return quick ? { measured: 100_000, otherTenants: 10, perOther: 2_000 } : { measured: 100_000, otherTenants: 10, perOther: 10_000 };
}

export interface ConversationLoad {
  what: string;
  /** The contactQuery sent (undefined: plain listing). */
  contactQuery?: string;
  connections: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  /** Rows on the page and `inboxCounts.total` (all matches of the tenant, or the cap) of one sample response. */
  rows: number;
  matches: number;
  /** The sample response said `inboxCountsCapped: true`. */
  capped: boolean;
  responseBytes: number;
  /** % of one core during the measured run: server (or bare), bench (autocannon), postgres, other. */
  cpuPct: Record<string, number>;
}

export interface QueryProfile {
  what: string;
  contactQuery?: string;
  /** Median server-side execution time of 5 runs (EXPLAIN ANALYZE), ms. */
  /** Execution time of the route's one statement (the page and the inbox counts of the whole filter). */
  queryMs: number;
  plan: string;
}

export interface ConversationsResult {
  db: DbKind;
  plan: ConversationPlan;
  seeded: { conversations: number; contacts: number; messages: number; seconds: number; vacuumSeconds: number };
  loads: ConversationLoad[];
  bare: ConversationLoad;
  /** First contactQuery load's req/s ÷ the bare server's. */
  ratioVsBare: number;
  /** The route's two queries under EXPLAIN ANALYZE on the seeded data, before the load. */
  profile: QueryProfile[];
}

/** The measured queries: a rare name, a common fragment, a phone number as typed, and no query. */
export const QUERIES: Array<{ what: string; contactQuery?: string }> = [
  { what: 'rare name', contactQuery: 'wojciech' },
  { what: 'common fragment', contactQuery: 'mar' },
  { what: 'phone number', contactQuery: '+52 55 1234' },
  { what: 'no query (plain listing)' },
];

const CONNECTIONS = 16;

const FIRST = ['María', 'José', 'Juan', 'Ana', 'Luis', 'Carmen', 'Carlos', 'Laura', 'Jorge', 'Sofía', 'Miguel', 'Lucía', 'Pedro', 'Elena', 'Mario', 'Marta', 'Diego', 'Paula', 'Javier', 'Isabel',
  'Marco', 'Andrea', 'Pablo', 'Valeria', 'Daniel', 'Camila', 'Omar', 'Gabriela', 'Ricardo', 'Fernanda', 'John', 'Emma', 'Liam', 'Olivia', 'Noah', 'Ava', 'Lucas', 'Mia', 'Ethan', 'Chloe'];
const LAST = ['García', 'Martínez', 'López', 'Hernández', 'González', 'Pérez', 'Rodríguez', 'Sánchez', 'Ramírez', 'Torres', 'Flores', 'Rivera', 'Gómez', 'Díaz', 'Cruz', 'Morales', 'Reyes', 'Jiménez',
  'Ruiz', 'Ortiz', 'Smith', 'Johnson', 'Brown', 'Williams', 'Miller', 'Davis', 'Wilson', 'Moore', 'Taylor', 'Anderson', 'Thomas', 'Jackson', 'White', 'Harris', 'Martin', 'Thompson', 'Moreno',
  'Romero', 'Navarro', 'Castillo'];
const PREVIEWS = ['Hola, ¿tienen habitación para el viernes?', 'Is late check-out possible tomorrow?', '¿A qué hora es el desayuno?', 'Can I bring my dog?', 'Gracias, nos vemos mañana',
  'Do you have parking for two cars?'];

const literal = (values: string[]) => `ARRAY[${values.map((v) => `'${v.replace(/'/g, "''")}'`).join(', ')}]::text[]`;

/**
 * One row per conversation i = 1..$4 of tenant $1 (id prefix $2, newest at $3): a contact name from FIRST × LAST
 * (pseudo-random pairing; every 20,000th, i ≡ 7777, is called Wojciechowska), four in five on WhatsApp with a
 * unique Mexico City number +5255xxxxxxxx, one in five on Instagram with a handle and no phone; last activity
 * every 25 s going back from $3.
 */
const ROWS = `
  SELECT i, first || ' ' || last AS name, phone, handle_stem || '.' || lower(last) AS handle, ($3::timestamptz - i * interval '25 seconds') AS at,
         (${literal(PREVIEWS)})[1 + i % ${PREVIEWS.length}] AS preview
  FROM (
    SELECT i, (${literal(FIRST)})[1 + h % ${FIRST.length}] AS first,
           CASE WHEN i % 20000 = 7777 THEN 'Wojciechowska' ELSE (${literal(LAST)})[1 + (h / ${FIRST.length}) % ${LAST.length}] END AS last,
           CASE WHEN i % 5 <> 0 THEN '+5255' || lpad(((i::bigint * 829348951) % 100000000)::text, 8, '0') END AS phone,
           CASE WHEN i % 5 = 0 THEN 'guest.' || i END AS handle_stem
    FROM (SELECT i, (i::bigint * 2654435761) % 4294967296 AS h FROM generate_series(1, $4::int) AS i) s
  ) t`;

const id = (kind: string) => `$2 || '${kind}_' || lpad(g.i::text, 7, '0')`;

const SEED = [
  `INSERT INTO contacts (id, tenant_id, name, phone_e164, handle, search_text, consent, opted_out, created_at, updated_at)
   SELECT ${id('ct')}, $1, g.name, g.phone, g.handle, concat_ws(' ', lower(g.name), regexp_replace(g.phone, '\\D', '', 'g'), lower(g.handle)),
          g.i % 2 = 0, g.i % 97 = 0, g.at - interval '2 days', g.at - interval '2 days'
   FROM (${ROWS}) g`,
  `INSERT INTO conversations (id, tenant_id, channel_id, channel_kind, contact_id, unread_count, needs_reply, needs_reply_reason,
     needs_reply_detail, needs_reply_event_id, last_message_at, last_message_preview, contact_name, contact_phone, created_at, updated_at)
   SELECT ${id('conv')}, $1, CASE WHEN g.phone IS NULL THEN $6 ELSE $5 END, CASE WHEN g.phone IS NULL THEN 'instagram' ELSE 'whatsapp' END,
          ${id('ct')}, CASE WHEN g.i % 3 = 0 THEN 1 + g.i % 4 ELSE 0 END, g.i % 4 = 0, CASE WHEN g.i % 4 = 0 THEN 'inbound_message' END,
          CASE WHEN g.i % 4 = 0 THEN g.preview END, CASE WHEN g.i % 4 = 0 THEN ${id('msg')} END, g.at, g.preview,
          g.name, g.phone, g.at - interval '2 days', g.at
   FROM (${ROWS}) g`,
  `INSERT INTO messages (id, tenant_id, conversation_id, direction, text, created_at)
   SELECT ${id('msg')}, $1, ${id('conv')}, 'inbound', g.preview, g.at FROM (${ROWS}) g`,
];

export interface Tenant {
  tenantId: string;
  whatsapp: string;
  instagram: string;
}

export type Query = (sql: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>>;

async function createTenant(base: string, name: string): Promise<Tenant> {
  const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name } });
  const channel = (kind: string) =>
    call<{ channelId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/channels`, { body: { kind, name: `${kind} line` } }).then((c) => c.channelId);
  return { tenantId, whatsapp: await channel('whatsapp'), instagram: await channel('instagram') };
}

/** Seeds every tenant's rows, checks search_text against the app's own function, then VACUUM ANALYZE. */
export async function seed(query: Query, tenants: Array<{ tenant: Tenant; count: number; prefix: string }>): Promise<ConversationsResult['seeded']> {
  const started = Date.now();
  const now = new Date().toISOString();
  for (const { tenant, count, prefix } of tenants) {
    const params = [tenant.tenantId, prefix, now, count, tenant.whatsapp, tenant.instagram];
    // Each statement gets exactly the parameters it uses ($1–$4, and the conversations one $5–$6 too).
    for (const sql of SEED) await query(sql, params.slice(0, sql.includes('$6') ? 6 : 4));
  }
  const seconds = round((Date.now() - started) / 1000, 1);
  // The SQL above must write what src/conversations/repo.ts searchText() writes: compare a sample (plus the
  // conversations the admin API created) before measuring anything.
  const sample = await query(
    `SELECT ct.search_text, c.contact_name, c.contact_phone, ct.name, ct.phone_e164, ct.handle FROM conversations c JOIN contacts ct ON ct.id = c.contact_id
     WHERE c.tenant_id = $1 AND (c.id NOT LIKE 'b%' OR c.id LIKE '%7777' OR c.id LIKE '%5' OR c.id LIKE '%0') LIMIT 400`,
    [tenants[0].tenant.tenantId],
  );
  for (const row of sample) {
    const expected = searchText({ name: row.name as string | null, phone_e164: row.phone_e164 as string | null, handle: row.handle as string | null });
    if (row.search_text !== expected) throw new Error(`seeded search_text "${String(row.search_text)}" differs from the app's "${expected}"`);
    if (row.contact_name !== row.name || row.contact_phone !== row.phone_e164) throw new Error('seeded conversation lacks its copy of the contact name or phone');
  }
  const vacuumStarted = Date.now();
  for (const table of ['contacts', 'conversations', 'messages']) await query(`VACUUM ANALYZE ${table}`);
  const vacuumSeconds = round((Date.now() - vacuumStarted) / 1000, 1);
  const [counts] = await query(
    `SELECT (SELECT count(*) FROM conversations)::int AS conversations, (SELECT count(*) FROM contacts)::int AS contacts, (SELECT count(*) FROM messages)::int AS messages`,
  );
  return { conversations: Number(counts.conversations), contacts: Number(counts.contacts), messages: Number(counts.messages), seconds, vacuumSeconds };
}

async function cannon(url: string, connections: number, seconds: number, headers: Record<string, string> = {}) {
  const instance = autocannon({ url, connections, duration: seconds, headers, timeout: 10 });
  const guard = setTimeout(() => instance.stop(), (seconds + 20) * 1000);
  const result = await instance;
  clearTimeout(guard);
  return {
    rps: round(result.requests.total / result.duration),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

interface Sample {
  rows: number;
  matches: number;
  /** `inboxCountsCapped`: more matched than the counts cover. */
  capped: boolean;
  body: string;
  contentType: string;
}

async function sample(url: string, headers: Record<string, string>): Promise<Sample> {
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(30_000) });
  const body = await response.text();
  if (!response.ok) throw new Error(`${url} answered ${response.status}: ${body.slice(0, 300)}`);
  const parsed = JSON.parse(body) as { conversations: unknown[]; inboxCounts: { total: number }; inboxCountsCapped?: true };
  return {
    rows: parsed.conversations.length,
    matches: parsed.inboxCounts.total,
    capped: parsed.inboxCountsCapped === true,
    body,
    contentType: response.headers.get('content-type') ?? 'application/json',
  };
}

async function measure(
  what: string,
  target: { url: string; pid: number | undefined; postgres: boolean; headers?: Record<string, string> },
  connections: number,
  timing: { warmupS: number; seconds: number },
  shape: Sample & { contactQuery?: string },
): Promise<ConversationLoad> {
  await cannon(target.url, connections, timing.warmupS, target.headers);
  const meter = new CpuMeter({ server: target.pid, bench: process.pid }, target.postgres);
  const load = await cannon(target.url, connections, timing.seconds, target.headers);
  const cpuPct = meter.stop();
  log(`  ${what}: ${fmt(load.rps)} req/s, p50 ${load.p50Ms} ms, p99 ${load.p99Ms} ms, non-2xx ${load.non2xx}, errors ${load.errors}`);
  return { what, contactQuery: shape.contactQuery, connections, ...load, rows: shape.rows, matches: shape.matches, capped: shape.capped, responseBytes: Buffer.byteLength(shape.body), cpuPct };
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of the route's statement, through the repository's own SQL (so the plans are
 * those of the SQL the route runs), each 5 times, one at a time: the database's share of a request.
 */
async function profile(query: Query, tenantId: string): Promise<QueryProfile[]> {
  let plan = '';
  const explainQuery = async <T>(sql: string, params?: readonly unknown[]): Promise<T[]> => {
    const rows = await query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params as unknown[] | undefined);
    plan = rows.map((r) => String(r['QUERY PLAN'])).join('\n');
    return [];
  };
  const explain = { query: explainQuery };
  const executionMs = () => Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? Number.NaN);
  const out: QueryProfile[] = [];
  for (const q of QUERIES) {
    const filter: ListFilter = { tenantId, ...contactSearch(q.contactQuery) };
    const times: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      await inboxSearchRepo.listWithCounts(explain, filter, { limit: 26, countCap: SEARCH_COUNT_CAP });
      times.push(executionMs());
    }
    out.push({ what: q.what, contactQuery: q.contactQuery, queryMs: round(median(times), 2), plan });
    log(`  EXPLAIN ANALYZE ${q.what}: page + counts statement ${fmt(median(times), 2)} ms (median of 5)`);
  }
  return out;
}

export async function runConversations(db: DbKind, postgresUrl: string | undefined, timing: Timing, plan = conversationPlan(db, timing.measureS < 10)): Promise<ConversationsResult> {
  // PGlite needs a data directory on disk: the server is stopped while the bench seeds through PGlite itself.
  const dataDir = db === 'pglite' ? mkdtempSync(path.join(tmpdir(), 'm2m-bench-conversations-')) : undefined;
  const schema = db === 'postgres' ? newSchema(postgresUrl!) : undefined;
  const dbEnv: Record<string, string> = db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: schema! } : { DATA_DIR: dataDir! };
  let server: Server | undefined;
  let bare: Awaited<ReturnType<typeof startBare>> | undefined;
  try {
    log(`conversations/${db}: starting server (--role api)`);
    server = await startServer(`conversations-${db}`, 'api', dbEnv);
    const base = server.baseUrl;
    const measured = await createTenant(base, 'Bench Inbox Hotel');
    const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${measured.tenantId}/api-keys`, { body: { name: 'bench', scopes: ['conversations:read'] } });
    // A few conversations through the real inbound path (their search_text is the app's own: checked against the seed's).
    for (const [channelId, contact] of [
      [measured.whatsapp, { name: 'Wojciech Kowalski', phone: '+48 601 234 567' }],
      [measured.whatsapp, { name: 'Marisol Vega', phone: '+1 415 555 0123' }],
      [measured.instagram, { name: 'Surfer Joe', handle: 'Surfer.Joe' }],
    ] as const) {
      await call(base, 'POST', `/admin/v1/tenants/${measured.tenantId}/inbound-messages`, { body: { channelId, contact, text: 'Hola, ¿hay habitación?' } });
    }
    const others: Tenant[] = [];
    for (let t = 1; t <= plan.otherTenants; t += 1) others.push(await createTenant(base, `Bench Other Hotel ${t}`));
    const tenants = [
      { tenant: measured, count: plan.measured, prefix: 'b0' },
      ...others.map((tenant, t) => ({ tenant, count: plan.perOther, prefix: `b${t + 1}` })),
    ];

    log(`conversations/${db}: seeding ${fmt(plan.measured)} conversations + ${plan.otherTenants} × ${fmt(plan.perOther)} for other tenants`);
    // Seeds, then profiles the route's queries on the seeded data (before any load: one query at a time).
    const seedAndProfile = async (query: Query) => {
      const result = await seed(query, tenants);
      log(`conversations/${db}: ${fmt(result.conversations)} conversations, ${fmt(result.contacts)} contacts, ${fmt(result.messages)} messages in the tables; seeded in ${result.seconds} s, VACUUM ANALYZE ${result.vacuumSeconds} s`);
      return { seeded: result, profiles: await profile(query, measured.tenantId) };
    };
    let world: { seeded: ConversationsResult['seeded']; profiles: QueryProfile[] };
    if (db === 'postgres') {
      world = await withPg(postgresUrl!, async (client) => {
        await client.query(`SET search_path TO ${schema}, public`);
        return seedAndProfile(async (sql, params) => (await client.query(sql, params)).rows as Array<Record<string, unknown>>);
      });
    } else {
      // PGlite allows one process at a time: stop the server, write through PGlite here, start it again.
      await stopChild(server.child);
      server = undefined;
      const lite = await openDb({ dataDir: dataDir! });
      try {
        world = await seedAndProfile((sql, params) => lite.query<Record<string, unknown>>(sql, params));
      } finally {
        await lite.close();
      }
      server = await startServer(`conversations2-${db}`, 'api', dbEnv);
    }
    const { seeded, profiles } = world;

    const headers = { authorization: `Bearer ${key}` };
    const urlOf = (contactQuery?: string) => `${server!.baseUrl}/m2m/v1/conversations${contactQuery ? `?contactQuery=${encodeURIComponent(contactQuery)}` : ''}`;
    const samples: Sample[] = [];
    for (const q of QUERIES) {
      const s = await sample(urlOf(q.contactQuery), headers);
      samples.push(s);
      log(`conversations/${db}: ${q.what}${q.contactQuery ? ` "${q.contactQuery}"` : ''}: ${s.rows} rows of ${fmt(s.matches)}${s.capped ? '+ (counts capped)' : ''} matches, ${fmt(Buffer.byteLength(s.body))} bytes`);
    }
    if (samples[0].matches < 1 || !samples[1].capped || samples[2].matches < 1) throw new Error('the seeded rows are not found by the searches: the seed no longer matches the search');

    const loads: ConversationLoad[] = [];
    const real = (contactQuery?: string) => ({ url: urlOf(contactQuery), pid: server!.pid, postgres: db === 'postgres', headers });
    const main = { warmupS: timing.warmupS, seconds: timing.measureS };
    for (const [i, q] of QUERIES.entries()) {
      loads.push(await measure(`${q.what}, ${CONNECTIONS} conns`, real(q.contactQuery), CONNECTIONS, main, { ...samples[i], contactQuery: q.contactQuery }));
    }
    loads.push(await measure(`${QUERIES[0].what}, 1 conn`, real(QUERIES[0].contactQuery), 1, { warmupS: timing.warmupS, seconds: timing.singleS }, { ...samples[0], contactQuery: QUERIES[0].contactQuery }));

    await stopChild(server.child);
    server = undefined;
    await sleep(500);

    bare = await startBare(`conversations-bare-${db}`, samples[0].body, samples[0].contentType);
    const bareLoad = await measure(`bare node:http, pre-serialised (${QUERIES[0].what}), ${CONNECTIONS} conns`, { url: `${bare.base}/raw`, pid: bare.child.pid, postgres: false }, CONNECTIONS, main, samples[0]);
    return { db, plan, seeded, loads, bare: bareLoad, ratioVsBare: round(loads[0].rps / bareLoad.rps, 3), profile: profiles };
  } finally {
    await stopChild(server?.child);
    await stopChild(bare?.child);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

export function printConversations(results: ConversationsResult[], dbName: (db: DbKind) => string): void {
  if (results.length === 0) return;
  const rows: string[][] = [];
  for (const r of results) {
    for (const load of [...r.loads, r.bare]) {
      rows.push([
        dbName(r.db),
        load.what,
        load === r.bare ? '' : load.contactQuery ?? '—',
        load === r.bare ? '' : `${load.rows} / ${fmt(load.matches)}${load.capped ? '+' : ''}`,
        fmt(load.rps),
        `${load.p50Ms} ms`,
        `${load.p99Ms} ms`,
        fmt(load.non2xx),
        fmt(load.errors),
        load === r.bare ? `${fmt(r.ratioVsBare, 3)}×` : '',
        `${fmt(load.cpuPct.server)} / ${fmt(load.cpuPct.bench)} / ${fmt(load.cpuPct.postgres)} / ${fmt(load.cpuPct.other)}`,
      ]);
    }
  }
  const worlds = results
    .map((r) => `${dbName(r.db)}: ${fmt(r.plan.measured)} + ${r.plan.otherTenants} × ${fmt(r.plan.perOther)} other tenants, seeded in ${fmt(r.seeded.seconds, 1)} s`)
    .join('; ');
  printTable(
    `Conversations — GET /m2m/v1/conversations?contactQuery=… (${worlds}) — "real/bare" = rare-name route req/s ÷ bare req/s`,
    ['database', 'target', 'contactQuery', 'rows / matches', 'req/s', 'p50', 'p99', 'non-2xx', 'errors', 'real/bare', 'CPU % server/bench/pg/other'],
    rows,
  );
  const profiled = results.filter((r) => r.profile.length > 0);
  for (const r of profiled) {
    printTable(
      `Conversations — execution time of the route's statement (page LIMIT 26 + inbox counts; ${dbName(r.db)}, EXPLAIN ANALYZE on the seeded data before the load, median of 5, one at a time; plans in results.json)`,
      ['query', 'contactQuery', 'page + counts'],
      r.profile.map((p) => [p.what, p.contactQuery ?? '—', `${fmt(p.queryMs, 2)} ms`]),
    );
  }
  for (const r of results) {
    if (r.plan.measured < 100_000) console.log(`note: ${dbName(r.db)} conversations used ${fmt(r.plan.measured)} conversations for the measured tenant, not 100,000.`);
  }
}
