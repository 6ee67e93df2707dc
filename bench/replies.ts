/**
 * Replies scenario (PostgreSQL): `POST /m2m/v1/conversations/{id}/messages` acknowledgements per second at 32
 * connections against `GET /conversations/{id}` of the same server in the same run (target: replies at least
 * 0.5× the read); queued→sent p99 with the sandbox provider at 200 replies/s (target < 250 ms); and
 * `GET /conversations/{id}/messages` of a conversation with 10,000 messages at 16 connections (target p99 < 20 ms).
 *
 * World: one tenant, a webchat channel (no customer-service window, so no reply is refused), 256 conversations
 * opened by real inbound messages (replies rotate over them, as an automatic replier's would), and one
 * conversation given 10,000 messages by direct SQL, then VACUUM ANALYZE. The server runs with `--role all`
 * so its workers send the replies (sandbox provider) while the load runs.
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
  read: RepliesLoad;
  replies: RepliesLoad;
  /** Reply 202/s ÷ GET /conversations/{id} req/s. */
  ratio: number;
  /** The sends the throughput run left queued, drained by the workers before the next phases. */
  drain: { queued: number; seconds: number; perSecond: number; left: number };
  messagesList: RepliesLoad;
  paced: { rate: number; sent: number; queuedToSentP50Ms: number; queuedToSentP99Ms: number; unsent: number };
}

const CONVERSATIONS = 256;
const LONG_CONVERSATION_MESSAGES = 10_000;
const PACED_RATE = 200;

async function load(what: string, server: Server, options: Options, timing: Timing): Promise<RepliesLoad> {
  await autocannon({ ...options, duration: timing.warmupS });
  const cpu = new CpuMeter({ server: server.pid }, true);
  const result = await autocannon({ ...options, duration: timing.measureS });
  const cpuPct = cpu.stop();
  const out = {
    what,
    connections: options.connections ?? 10,
    rps: round(result['2xx'] / result.duration),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    cpuPct,
  };
  log(`replies: ${what}: ${fmt(out.rps)} req/s, p99 ${out.p99Ms} ms, non-2xx ${out.non2xx}`);
  return out;
}

export async function runReplies(postgresUrl: string, timing: Timing): Promise<RepliesResult> {
  const schema = newSchema(postgresUrl);
  const dbEnv = { DATABASE_URL: postgresUrl, DATABASE_SCHEMA: schema };
  let server: Server | undefined;
  try {
    log('replies/postgres: starting server (--role all, sandbox provider)');
    server = await startServer('replies-postgres', 'all', dbEnv);
    const base = server.baseUrl;
    const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name: 'Bench Replies Hotel' } });
    const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'bench', scopes: ['conversations:write', 'messages:read'] } });
    const { channelId } = await call<{ channelId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/channels`, { body: { kind: 'webchat', name: 'Web' } });
    const conversations: string[] = [];
    for (let i = 0; i < CONVERSATIONS; i++) {
      const { conversationId } = await call<{ conversationId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/inbound-messages`, { body: { channelId, contact: { handle: `guest-${i}` }, text: 'Hola' } });
      conversations.push(conversationId);
    }
    const long = conversations[0];
    await withPg(postgresUrl, async (client) => {
      await client.query(`SET search_path TO ${schema}, public`);
      await client.query(
        `INSERT INTO messages (id, tenant_id, conversation_id, direction, text, created_at)
         SELECT 'msg_bench' || i, $1, $2, CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'message ' || i, now() - interval '1 day' + i * interval '1 second'
         FROM generate_series(1, $3::int) AS i`,
        [tenantId, long, LONG_CONVERSATION_MESSAGES],
      );
      await client.query('VACUUM ANALYZE messages');
    });
    log(`replies/postgres: ${CONVERSATIONS} conversations, one with ${fmt(LONG_CONVERSATION_MESSAGES)} messages`);

    const auth = { authorization: `Bearer ${key}` };
    const read = await load('GET /conversations/{id}', server, { url: `${base}/m2m/v1/conversations/${conversations[1]}`, connections: 32, headers: auth }, timing);
    let next = 0;
    const replies = await load(
      'POST /conversations/{id}/messages',
      server,
      {
        url: base,
        connections: 32,
        idReplacement: true,
        requests: [
          {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': 'bench-[<id>]' },
            body: JSON.stringify({ text: 'Thanks, we will answer shortly.' }),
            setupRequest: (request: RequestData) => ({ ...request, path: `/m2m/v1/conversations/${conversations[1 + (next++ % (CONVERSATIONS - 1))]}/messages` }),
          },
        ],
      },
      timing,
    );

    // The throughput run leaves its sends queued: the workers (same process) drain them before the next
    // phases, which would otherwise measure the drain as much as themselves. The drain rate is reported.
    const backlog = async () =>
      withPg(postgresUrl, async (client) => (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.message_requests WHERE status = 'queued'`)).rows[0].n);
    const drainStarted = Date.now();
    const queuedAfterReplies = await backlog();
    let queuedLeft = queuedAfterReplies;
    while (queuedLeft > 0 && Date.now() - drainStarted < 120_000) {
      await sleep(250);
      queuedLeft = await backlog();
    }
    const drainS = (Date.now() - drainStarted) / 1000;
    const drain = { queued: queuedAfterReplies, seconds: round(drainS, 1), perSecond: round((queuedAfterReplies - queuedLeft) / drainS), left: queuedLeft };
    log(`replies: drained ${fmt(drain.queued - drain.left)} queued sends in ${drain.seconds} s (${fmt(drain.perSecond)}/s, ${drain.left} left)`);

    const messagesList = await load('GET /conversations/{id}/messages (10,000 messages)', server, { url: `${base}/m2m/v1/conversations/${long}/messages`, connections: 16, headers: auth }, timing);

    // Queued → sent at a steady 200 replies/s.
    const startedAt = new Date();
    const seconds = timing.measureS;
    const sends: Array<Promise<unknown>> = [];
    for (let i = 0; i < PACED_RATE * seconds; i++) {
      const due = startedAt.getTime() + (i * 1000) / PACED_RATE;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      const conversationId = conversations[1 + (i % (CONVERSATIONS - 1))];
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
    return { read, replies, ratio: round(replies.rps / read.rps, 3), drain, messagesList, paced };
  } finally {
    await stopChild(server?.child);
  }
}

export function printReplies(result: RepliesResult | undefined): void {
  if (!result) return;
  const row = (l: RepliesLoad, note: string) => [l.what, String(l.connections), fmt(l.rps), `${l.p50Ms} ms`, `${l.p99Ms} ms`, fmt(l.non2xx), fmt(l.errors), note];
  printTable('Scenario 7 — replies on PostgreSQL', ['route', 'conns', 'req/s', 'p50', 'p99', 'non-2xx', 'errors', 'target'], [
    row(result.read, ''),
    row(result.replies, `${fmt(result.ratio, 3)}× the read (≥ 0.5×)`),
    [`send backlog drained (${fmt(result.drain.queued)} queued)`, '', fmt(result.drain.perSecond), `${result.drain.seconds} s`, '', '', fmt(result.drain.left), ''],
    row(result.messagesList, 'p99 < 20 ms'),
    [`queued→sent at ${result.paced.rate}/s`, '', fmt(result.paced.sent), `${result.paced.queuedToSentP50Ms} ms`, `${result.paced.queuedToSentP99Ms} ms`, '', fmt(result.paced.unsent), 'p99 < 250 ms'],
  ]);
}
