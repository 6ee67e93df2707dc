/**
 * Replies scenario (PostgreSQL): `POST /m2m/v1/conversations/{id}/messages` acknowledgements per second at 32
 * connections against `GET /conversations/{id}` of the same server in the same run (target: replies at least
 * 0.5× the read); queued→sent p99 with the sandbox provider at 200 replies/s (target < 250 ms); and
 * `GET /conversations/{id}/messages` of a conversation with 10,000 messages at 16 connections (target p99 < 20 ms).
 *
 * World: one tenant, a webchat channel (no customer-service window, so no reply is refused), 256 conversations
 * opened by real inbound messages (replies rotate over 254 of them, as an automatic replier's would; one is the
 * read's, which no reply touches), and one conversation given 10,000 messages by direct SQL, then VACUUM ANALYZE.
 * An API node (`--role api`) serves the read and the first reply load alone: the target compares the reply's write
 * transaction with the read. The two alternate in rounds, so that a slow spell of the shared machine falls on both.
 * A worker node (`--role worker`, sandbox provider) then drains the sends, and the reply load runs again while it
 * sends them (both nodes on the same cores); the later phases run with both nodes.
 */
import autocannon, { type Options, type RequestData } from 'autocannon';
import type { Timing } from './api.js';
import { CpuMeter, fmt, log, percentile, printTable, round, sleep } from './lib.js';
import { call, newSchema, startServer, stopChild, withPg, type Server } from './procs.js';

export interface RepliesLoad {
  what: string;
  connections: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  cpuPct: Record<string, number>;
}

export interface RepliesResult {
  /** The read's rounds together. */
  read: RepliesLoad;
  /** The API node alone, its rounds together: the sends stay queued. */
  replies: RepliesLoad;
  /** Reply 202/s ÷ GET /conversations/{id} req/s, the API node alone, over all rounds. */
  ratio: number;
  /** Each round's read and replies, measured one after the other. */
  rounds: Array<{ readRps: number; repliesRps: number; ratio: number }>;
  /** The sends the first reply load left queued, drained by the worker node once started. */
  drain: Drain;
  /** While the worker node sends them. */
  repliesWhileSending: RepliesLoad;
  ratioWhileSending: number;
  /** Requests the worker node sent per second during that load (warm-up included): what the machine did besides. */
  sendsWhileSending: number;
  /** What the second reply load left queued, drained before the next phases. */
  drainAfterSending: Drain;
  messagesList: RepliesLoad;
  paced: { rate: number; sent: number; queuedToSentP50Ms: number; queuedToSentP99Ms: number; unsent: number };
}

interface Drain {
  queued: number;
  seconds: number;
  perSecond: number;
  left: number;
}

const CONVERSATIONS = 256;
const LONG_CONVERSATION_MESSAGES = 10_000;
const PACED_RATE = 200;
/** Rounds of the read and the first reply load, each round measuring half of `measureS` of each. */
const ROUNDS = 3;

interface Window {
  ok: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  cpuPct: Record<string, number>;
}

async function measure(server: Server, options: Options, seconds: number): Promise<Window> {
  const cpu = new CpuMeter({ server: server.pid }, true);
  const result = await autocannon({ ...options, duration: seconds });
  return {
    ok: result['2xx'],
    seconds: result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    cpuPct: cpu.stop(),
  };
}

/** Windows of one load as one row: the rate over all of them, the median p50 and the worst p99. */
function combine(what: string, options: Options, windows: Window[]): RepliesLoad {
  const sum = (pick: (w: Window) => number) => windows.reduce((total, w) => total + pick(w), 0);
  const p50s = windows.map((w) => w.p50Ms).sort((a, b) => a - b);
  const cpuPct: Record<string, number> = {};
  for (const key of Object.keys(windows[0].cpuPct)) cpuPct[key] = round(sum((w) => w.cpuPct[key] ?? 0) / windows.length);
  const out = {
    what,
    connections: options.connections ?? 10,
    rps: round(sum((w) => w.ok) / sum((w) => w.seconds)),
    p50Ms: p50s[Math.floor(p50s.length / 2)],
    p99Ms: Math.max(...windows.map((w) => w.p99Ms)),
    non2xx: sum((w) => w.non2xx),
    errors: sum((w) => w.errors),
    cpuPct,
  };
  log(`replies: ${what}: ${fmt(out.rps)} req/s, p99 ${out.p99Ms} ms, non-2xx ${out.non2xx}`);
  return out;
}

async function load(what: string, server: Server, options: Options, timing: Timing): Promise<RepliesLoad> {
  await autocannon({ ...options, duration: timing.warmupS });
  return combine(what, options, [await measure(server, options, timing.measureS)]);
}

/** Scenario 7's world, seeded through a node's admin API: the conversations and the long conversation's id. */
export interface RepliesWorld {
  key: string;
  long: string;
  readTarget: string;
  replied: string[];
}

export async function seedRepliesWorld(base: string, postgresUrl: string, schema: string, tenantName: string): Promise<RepliesWorld> {
  const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name: tenantName } });
  const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'bench', scopes: ['conversations:write', 'messages:read'] } });
  const { channelId } = await call<{ channelId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/channels`, { body: { kind: 'webchat', name: 'Web' } });
  const conversations: string[] = [];
  for (let i = 0; i < CONVERSATIONS; i++) {
    const { conversationId } = await call<{ conversationId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/inbound-messages`, { body: { channelId, contact: { handle: `guest-${i}` }, text: 'Hola' } });
    conversations.push(conversationId);
  }
  const [long, readTarget, ...replied] = conversations;
  await withPg(postgresUrl, async (client) => {
    await client.query(`SET search_path TO ${schema}, public`);
    await client.query(
      `INSERT INTO messages (id, tenant_id, conversation_id, direction, text, created_at)
       SELECT 'msg_bench' || i, $1, $2, CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'message ' || i, now() - interval '1 day' + i * interval '1 second'
       FROM generate_series(1, $3::int) AS i`,
      [tenantId, long, LONG_CONVERSATION_MESSAGES],
    );
    await client.query('VACUUM ANALYZE messages');
    // The other tables too, as autovacuum would have by the time a tenant has 256 conversations (bench/README).
    await client.query('ANALYZE');
  });
  return { key, long, readTarget, replied };
}

/** Scenario 7's three loads on a world; the replies' Idempotency-Keys start with `keyPrefix`. */
export function repliesLoads(base: string, world: RepliesWorld, keyPrefix: string): { read: Options; replies: Options; page: Options } {
  const auth = { authorization: `Bearer ${world.key}` };
  let next = 0;
  return {
    read: { url: `${base}/m2m/v1/conversations/${world.readTarget}`, connections: 32, headers: auth },
    replies: {
      url: base,
      connections: 32,
      idReplacement: true,
      requests: [
        {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `${keyPrefix}-[<id>]` },
          body: JSON.stringify({ text: 'Thanks, we will answer shortly.' }),
          setupRequest: (request: RequestData) => ({ ...request, path: `/m2m/v1/conversations/${world.replied[next++ % world.replied.length]}/messages` }),
        },
      ],
    },
    page: { url: `${base}/m2m/v1/conversations/${world.long}/messages`, connections: 16, headers: auth },
  };
}

export async function runReplies(postgresUrl: string, timing: Timing): Promise<RepliesResult> {
  const schema = newSchema(postgresUrl);
  const dbEnv = { DATABASE_URL: postgresUrl, DATABASE_SCHEMA: schema };
  let server: Server | undefined;
  let worker: Server | undefined;
  try {
    log('replies/postgres: starting an API node (--role api)');
    server = await startServer('replies-postgres', 'api', dbEnv, {}, { compiled: true });
    const base = server.baseUrl;
    const world = await seedRepliesWorld(base, postgresUrl, schema, 'Bench Replies Hotel');
    log(`replies/postgres: ${CONVERSATIONS} conversations, one with ${fmt(LONG_CONVERSATION_MESSAGES)} messages`);

    const { replied } = world;
    const auth = { authorization: `Bearer ${world.key}` };
    const loads = repliesLoads(base, world, 'bench');
    const readOptions = loads.read;
    const replyOptions = loads.replies;
    await autocannon({ ...readOptions, duration: timing.warmupS });
    await autocannon({ ...replyOptions, duration: timing.warmupS });
    const readWindows: Window[] = [];
    const replyWindows: Window[] = [];
    const rounds: RepliesResult['rounds'] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const readWindow = await measure(server, readOptions, timing.measureS / 2);
      const replyWindow = await measure(server, replyOptions, timing.measureS / 2);
      readWindows.push(readWindow);
      replyWindows.push(replyWindow);
      const readRps = round(readWindow.ok / readWindow.seconds);
      const repliesRps = round(replyWindow.ok / replyWindow.seconds);
      rounds.push({ readRps, repliesRps, ratio: round(repliesRps / readRps, 3) });
      log(`replies: round ${i + 1}: read ${fmt(readRps)} req/s, replies ${fmt(repliesRps)} req/s (${fmt(repliesRps / readRps, 3)}×)`);
    }
    const read = combine('GET /conversations/{id}', readOptions, readWindows);
    const replies = combine('POST /conversations/{id}/messages', replyOptions, replyWindows);

    // The first reply load leaves its sends queued: the worker node drains them (the rate is reported), then
    // the load runs again while it sends, and what that leaves is drained before the next phases, which would
    // otherwise measure the drain as much as themselves.
    // Requests still queued, or no longer (sent, or failed: the sandbox provider never fails).
    const requests = async (queued: boolean) =>
      withPg(postgresUrl, async (client) => (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.message_requests WHERE (status = 'queued') = $1`, [queued])).rows[0].n);
    const backlog = () => requests(true);
    const drained = async (): Promise<Drain> => {
      const drainStarted = Date.now();
      const queued = await backlog();
      let left = queued;
      while (left > 0 && Date.now() - drainStarted < 120_000) {
        await sleep(250);
        left = await backlog();
      }
      const seconds = (Date.now() - drainStarted) / 1000;
      const drain = { queued, seconds: round(seconds, 1), perSecond: round((queued - left) / seconds), left };
      log(`replies: drained ${fmt(drain.queued - drain.left)} queued sends in ${drain.seconds} s (${fmt(drain.perSecond)}/s, ${drain.left} left)`);
      return drain;
    };
    log('replies/postgres: starting a worker node (--role worker, sandbox provider)');
    worker = await startServer('replies-worker', 'worker', dbEnv, {}, { compiled: true });
    const drain = await drained();
    const sentBefore = await requests(false);
    const sendingStarted = Date.now();
    const repliesWhileSending = await load('POST /conversations/{id}/messages, a worker node sending', server, replyOptions, timing);
    const sendsWhileSending = round(((await requests(false)) - sentBefore) / ((Date.now() - sendingStarted) / 1000));
    const drainAfterSending = await drained();

    const messagesList = await load('GET /conversations/{id}/messages (10,000 messages)', server, loads.page, timing);

    // Queued → sent at a steady 200 replies/s.
    const startedAt = new Date();
    const seconds = timing.measureS;
    const sends: Array<Promise<unknown>> = [];
    for (let i = 0; i < PACED_RATE * seconds; i++) {
      const due = startedAt.getTime() + (i * 1000) / PACED_RATE;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      const conversationId = replied[i % replied.length];
      sends.push(fetch(`${base}/m2m/v1/conversations/${conversationId}/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `paced-${i}` }, body: '{"text":"On our way."}' }).then((r) => r.text()));
    }
    await Promise.all(sends);
    await sleep(2_000);
    const latencies = await withPg(postgresUrl, async (client) => {
      const rows = await client.query<{ ms: number | null; status: string }>(
        `SELECT status, CASE WHEN status <> 'queued' THEN extract(epoch FROM updated_at - created_at) * 1000 END AS ms FROM ${schema}.message_requests WHERE created_at >= $1`,
        [startedAt],
      );
      return rows.rows;
    });
    const sent = latencies.filter((row) => row.ms !== null).map((row) => Number(row.ms)).sort((a, b) => a - b);
    const paced = {
      rate: PACED_RATE,
      sent: sent.length,
      queuedToSentP50Ms: round(percentile(sent, 50), 1),
      queuedToSentP99Ms: round(percentile(sent, 99), 1),
      unsent: latencies.length - sent.length,
    };
    log(`replies: queued→sent at ${PACED_RATE}/s: p50 ${paced.queuedToSentP50Ms} ms, p99 ${paced.queuedToSentP99Ms} ms (${paced.sent} sent, ${paced.unsent} still queued)`);
    return {
      read,
      replies,
      ratio: round(replies.rps / read.rps, 3),
      rounds,
      drain,
      repliesWhileSending,
      ratioWhileSending: round(repliesWhileSending.rps / read.rps, 3),
      sendsWhileSending,
      drainAfterSending,
      messagesList,
      paced,
    };
  } finally {
    await stopChild(server?.child);
    await stopChild(worker?.child);
  }
}

function drainRow(drain: Drain, what: string): string[] {
  return [`send backlog drained (${fmt(drain.queued)} queued, ${what})`, '', fmt(drain.perSecond), `${drain.seconds} s`, '', '', fmt(drain.left), ''];
}

export function printReplies(result: RepliesResult | undefined): void {
  if (!result) return;
  const row = (l: RepliesLoad, note: string) => [l.what, String(l.connections), fmt(l.rps), `${l.p50Ms} ms`, `${l.p99Ms} ms`, fmt(l.non2xx), fmt(l.errors), note];
  printTable('Scenario 7 — replies on PostgreSQL', ['route', 'conns', 'req/s', 'p50', 'p99', 'non-2xx', 'errors', 'target'], [
    row(result.read, ''),
    row(result.replies, `${fmt(result.ratio, 3)}× the read (≥ 0.5×; rounds ${result.rounds.map((r) => fmt(r.ratio, 2)).join(', ')})`),
    drainRow(result.drain, 'the worker node started'),
    row(result.repliesWhileSending, `${fmt(result.ratioWhileSending, 3)}× the read; ${fmt(result.sendsWhileSending)} sends/s meanwhile`),
    drainRow(result.drainAfterSending, 'left by the row above'),
    row(result.messagesList, 'p99 < 20 ms'),
    [`queued→sent at ${result.paced.rate}/s`, '', fmt(result.paced.sent), `${result.paced.queuedToSentP50Ms} ms`, `${result.paced.queuedToSentP99Ms} ms`, '', fmt(result.paced.unsent), 'p99 < 250 ms'],
  ]);
}
