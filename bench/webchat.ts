/**
 * Scenario `webchat` (issue 43): N visitors connected by Server-Sent Events at once, each visitor message answered by
 * the auto-reply example (packages/client/examples/auto-reply.ts) through the API and the webchat provider. Measured:
 * visitor message → reply event in that visitor's stream (p50/p99), the visitor's own message back on its stream
 * (the webchat path alone), where the time goes link by link, and the server's RSS per idle connected visitor.
 * Target (issue 43, PostgreSQL): reply p99 < 500 ms at 100 messages/s with 1,000 visitors; RSS < 20 KB per visitor.
 * The measured messages follow WARM_UP_SECONDS of the same load, unmeasured (a node that has been serving).
 *
 * The links (wall clock of this machine, shared by the server and the bench); the POST's answer and the webhook both
 * follow the visitor's POST (the webhook may arrive before the 201 does), each later link follows the one above it:
 *   POST answered     visitor POST /webchat/v1/messages → its 201
 *   webhook arrived   visitor POST → message.created at the example's receiver (commit, the dispatcher's claim, request)
 *   message read      → the example's GET of the message answered (the example acknowledges the delivery at once
 *                       and handles accepted events a bounded number at a time: its wait for a turn counts here)
 *   composed          → the example's knowledge search answered (its reply text ready)
 *   reply answered    → POST …/messages (the reply) answered: the reply and its send job committed
 *   sent              → the webchat provider wrote the reply to the visitor's stream (the event's createdAt)
 *   shown             → the reply event read from the visitor's stream
 *
 * Alone: node --import tsx bench/webchat.ts [--visitors 1000] [--rate 100] [--seconds 20] [--db postgres|pglite]
 * In the suite: npm run bench -- --only webchat [--db …] [--quick]
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { M2MClient } from '../packages/client/src/index.js';
import { createAutoReplier, knowledgeReply } from '../packages/client/examples/auto-reply.js';
import { CpuMeter, DEFAULT_POSTGRES_URL, fmt, log, printTable, round, rssKb, sleep, summarise, type DbKind } from './lib.js';
import { call, dbLabel, dropSchemas, newSchema, startServer, stopChild, withPg, type Server } from './procs.js';

const ORIGIN = 'https://bench-hotel.example';
/** Seconds of load at the offered rate before the measured ones. */
const WARM_UP_SECONDS = 3;
const STAGES = ['POST answered', 'webhook arrived', 'message read', 'composed', 'reply answered', 'sent', 'shown'] as const;
type Stage = (typeof STAGES)[number];
/** The point each link is timed from. */
const FROM: Record<Stage, 'start' | Stage> = {
  'POST answered': 'start',
  'webhook arrived': 'start',
  'message read': 'webhook arrived',
  composed: 'message read',
  'reply answered': 'composed',
  sent: 'reply answered',
  shown: 'sent',
};

export interface WebchatPlan {
  visitors: number;
  rate: number;
  seconds: number;
}

export interface WebchatResult {
  db: DbKind;
  plan: WebchatPlan;
  connectMs: number;
  rssBeforeMb: number;
  rssIdleMb: number;
  rssPerVisitorKb: number;
  messages: number;
  offeredRate: number;
  refused: number;
  replyP50Ms: number;
  replyP99Ms: number;
  replyMaxMs: number;
  echoP50Ms: number;
  echoP99Ms: number;
  /** Each link's own time (from the point in FROM), p50 / p99 in ms. */
  stages: Record<Stage, { p50: number; p99: number }>;
  /** PostgreSQL transactions committed per visitor message during the run (the whole database: other users count too). */
  pgCommitsPerMessage?: number;
  cpuPct: Record<string, number>;
  /** CPU time per visitor message: the server process, and PostgreSQL (the whole server: other users count too). */
  cpuMsPerMessage: { server: number; postgres?: number };
}

/** Milliseconds on the wall clock (the server stamps events with Date; the bench times with the same clock). */
const wall = () => performance.timeOrigin + performance.now();

interface Pending {
  n: number;
  resolve: () => void;
}

interface Visitor {
  token: string;
  controller: AbortController;
  /** Messages sent whose reply is awaited, oldest first (a visitor has one in flight at a time at these rates). */
  waiting: Pending[];
}

/** The times of message n at each link (wall clock ms), filled as they happen. */
type Trace = Partial<Record<'start' | Stage | 'echo', number>>;

async function openStream(base: string, visitor: Visitor, traces: Trace[]): Promise<void> {
  const res = await fetch(`${base}/webchat/v1/stream?sessionToken=${encodeURIComponent(visitor.token)}`, { headers: { origin: ORIGIN }, signal: visitor.controller.signal });
  if (res.status !== 200 || !res.body) throw new Error(`stream → ${res.status}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let connected!: () => void;
  const ready = new Promise<void>((resolve) => (connected = resolve));
  void (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (block.startsWith(': connected')) connected();
          if (!block.includes('event: message')) continue;
          const data = JSON.parse(block.slice(block.indexOf('data: ') + 6)) as { direction: string; text?: string; createdAt: string };
          if (data.direction === 'inbound') {
            const n = /\((\d+)\)$/.exec(data.text ?? '');
            if (n && traces[Number(n[1])]) traces[Number(n[1])].echo = wall();
          } else {
            const pending = visitor.waiting.shift();
            if (!pending) continue;
            const trace = traces[pending.n];
            trace.shown = wall();
            // The provider's write, stamped by the server.
            trace.sent = Date.parse(data.createdAt);
            pending.resolve();
          }
        }
      }
    } catch {
      // aborted at the end
    }
  })();
  await ready;
}

export async function runWebchat(db: DbKind, postgresUrl: string | undefined, plan: WebchatPlan): Promise<WebchatResult> {
  const { visitors, rate, seconds } = plan;
  const pgUrl = postgresUrl ?? process.env.DATABASE_URL ?? DEFAULT_POSTGRES_URL;
  const dbEnv: Record<string, string> = db === 'postgres' ? { DATABASE_URL: pgUrl, DATABASE_SCHEMA: newSchema(pgUrl) } : { DATA_DIR: 'memory://' };
  let server: Server | undefined;
  let replier: http.Server | undefined;
  const all: Visitor[] = [];
  try {
    log(`webchat/${db}: starting server (--role all); ${fmt(visitors)} visitors, ${rate} messages/s for ${seconds} s`);
    server = await startServer(`webchat-${db}`, 'all', dbEnv, { WEBCHAT_RATE_LIMIT_PER_MINUTE: '1000', WEBHOOK_RETRY_DELAYS_MS: '200,200,200,200,200,200' });
    const base = server.baseUrl;
    const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name: 'Bench Hotel' } });
    const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'bench', scopes: ['webhooks:write', 'conversations:write', 'messages:read'] } });
    const { widgetId } = await call<{ widgetId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/channels`, {
      body: { kind: 'webchat', name: 'Site', provider: 'webchat', connection: { allowedOrigins: [ORIGIN] } },
    });

    // The auto-reply example as it is, its default answer (knowledgeReply) timed around: which message it reads
    // (the number at the end of the visitor's text), when the read answered and when the answer was composed.
    const traces: Trace[] = [];
    const byMessage = new Map<string, number>();
    const hookArrivals = new Map<string, number>();
    const client = new M2MClient({ apiKey: key, baseUrl: `${base}/m2m/v1` });
    const answer = knowledgeReply(client);
    const subscription = await client.webhooks.create({ url: 'http://127.0.0.1:9/placeholder', events: ['message.created'] });
    replier = createAutoReplier({
      client,
      secret: subscription.secret!,
      compose: async (message) => {
        const read = wall();
        const n = /\((\d+)\)$/.exec(message.text ?? '');
        const text = await answer(message);
        if (n && traces[Number(n[1])]) {
          const trace = traces[Number(n[1])];
          trace['message read'] = read;
          trace.composed = wall();
          byMessage.set(message.messageId, Number(n[1]));
        }
        return text;
      },
      onOutcome: (outcome) => {
        if (outcome.action !== 'replied') return;
        const n = byMessage.get(outcome.messageId);
        if (n === undefined) return;
        byMessage.delete(outcome.messageId);
        traces[n]['reply answered'] = wall();
        const arrived = hookArrivals.get(outcome.eventId);
        if (arrived !== undefined) traces[n]['webhook arrived'] = arrived;
      },
    });
    // Before the example's own handler: when each delivery arrived.
    replier.prependListener('request', (req: http.IncomingMessage) => {
      const eventId = req.headers['x-service-event-id'];
      if (typeof eventId === 'string') hookArrivals.set(eventId, wall());
    });
    await new Promise<void>((resolve) => replier!.listen(0, '127.0.0.1', resolve));
    await client.webhooks.update({ subscriptionId: subscription.subscriptionId, url: `http://127.0.0.1:${(replier.address() as AddressInfo).port}/hook` });

    for (let i = 0; i < visitors; i++) {
      const res = await fetch(`${base}/webchat/v1/sessions`, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'application/json' }, body: JSON.stringify({ widgetId }) });
      const { sessionToken } = (await res.json()) as { sessionToken: string };
      all.push({ token: sessionToken, controller: new AbortController(), waiting: [] });
    }
    await sleep(3_000);
    const rssBefore = rssKb(server.pid) ?? 0;
    const connectStarted = performance.now();
    for (let i = 0; i < all.length; i += 50) await Promise.all(all.slice(i, i + 50).map((v) => openStream(base, v, traces)));
    const connectMs = performance.now() - connectStarted;
    await sleep(5_000);
    const rssIdle = rssKb(server.pid) ?? 0;
    const rssPerVisitorKb = (rssIdle - rssBefore) / visitors;
    log(`webchat/${db}: ${fmt(visitors)} streams connected in ${fmt(connectMs)} ms; RSS ${fmt(rssBefore / 1024)} → ${fmt(rssIdle / 1024)} MB: ${fmt(rssPerVisitorKb, 1)} KB per connected visitor`);

    const post = (visitor: Visitor, text: string) =>
      fetch(`${base}/webchat/v1/messages`, {
        method: 'POST',
        headers: { origin: ORIGIN, 'content-type': 'application/json', authorization: `Bearer ${visitor.token}` },
        body: JSON.stringify({ text }),
      });
    const total = rate * seconds;
    let refused = 0;
    /** Offers messages first..first+count-1 at `rate` from now; the promises settle as their replies are shown. */
    const offer = async (first: number, count: number): Promise<Array<Promise<void>>> => {
      const replies: Array<Promise<void>> = [];
      const offeredFrom = performance.now();
      for (let n = first; n < first + count; n++) {
        const due = offeredFrom + ((n - first) * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const visitor = all[n % all.length];
        const trace: Trace = { start: wall() };
        traces[n] = trace;
        const pending: Pending = { n, resolve: () => undefined };
        replies.push(new Promise<void>((resolve) => (pending.resolve = resolve)));
        visitor.waiting.push(pending);
        // A refused message gets no reply: it stops being awaited (and is counted).
        const refuse = () => {
          refused++;
          visitor.waiting.splice(visitor.waiting.indexOf(pending), 1);
          pending.resolve();
        };
        void post(visitor, `Is breakfast included? (${n})`).then(
          async (res) => {
            trace['POST answered'] = wall();
            if (res.status !== 201) refuse();
            await res.arrayBuffer();
          },
          refuse,
        );
      }
      return replies;
    };
    // Warm-up at the offered rate, unmeasured: a node's first seconds under load open its pool's connections and
    // compile its hot paths, which a node that has been serving does not pay again. Numbered after the measured ones.
    const warmUp = rate * WARM_UP_SECONDS;
    const warmed = await Promise.race([Promise.all(await offer(total, warmUp)).then(() => true), sleep(60_000).then(() => false)]);
    // A reply still awaited would be taken for a measured message's: the measured run starts from none.
    if (!warmed) throw new Error(`the ${warmUp} warm-up messages were not all answered within 60 s`);
    if (refused > 0) throw new Error(`${refused} of the ${warmUp} warm-up messages were refused`);

    const commitsBefore = db === 'postgres' ? await pgCommits(pgUrl) : undefined;
    const cpu = new CpuMeter({ server: server.pid, bench: process.pid }, db === 'postgres');
    const started = performance.now();
    const replies = await offer(0, total);
    const offeredRate = (total / (performance.now() - started)) * 1000;
    const done = await Promise.race([Promise.all(replies).then(() => true), sleep(120_000).then(() => false)]);
    const cpuPct = cpu.stop();
    const cpuSeconds = (performance.now() - started) / 1000;
    const perMessage = (pct: number) => round((pct / 100) * cpuSeconds * 1000 / total, 2);
    const commitsAfter = db === 'postgres' ? await pgCommits(pgUrl) : undefined;
    if (!done) {
      const missing = traces.slice(0, total).filter((t) => t.shown === undefined && t['POST answered'] !== undefined);
      const reached = STAGES.map((stage) => `${stage} ${missing.filter((t) => t[stage] !== undefined).length}`).join(', ');
      throw new Error(`replies did not all arrive within 120 s: ${total - refused - missing.length} of ${total - refused} shown; of the ${missing.length} missing, reached: ${reached}`);
    }

    const measured = traces.slice(0, total).filter((t) => t.shown !== undefined);
    const reply = summarise(measured.map((t) => t.shown! - t.start!));
    const echo = summarise(measured.filter((t) => t.echo !== undefined).map((t) => t.echo! - t.start!));
    const stages = {} as WebchatResult['stages'];
    for (const stage of STAGES) {
      const from = FROM[stage];
      const s = summarise(measured.filter((t) => t[stage] !== undefined && t[from] !== undefined).map((t) => t[stage]! - t[from]!));
      stages[stage] = { p50: round(s.p50), p99: round(s.p99) };
    }
    return {
      db,
      plan,
      connectMs: round(connectMs),
      rssBeforeMb: round(rssBefore / 1024, 1),
      rssIdleMb: round(rssIdle / 1024, 1),
      rssPerVisitorKb: round(rssPerVisitorKb, 1),
      messages: total,
      offeredRate: round(offeredRate),
      refused,
      replyP50Ms: round(reply.p50),
      replyP99Ms: round(reply.p99),
      replyMaxMs: round(reply.max),
      echoP50Ms: round(echo.p50),
      echoP99Ms: round(echo.p99),
      stages,
      ...(commitsBefore !== undefined && commitsAfter !== undefined ? { pgCommitsPerMessage: round((commitsAfter - commitsBefore) / total, 1) } : {}),
      cpuPct,
      cpuMsPerMessage: { server: perMessage(cpuPct.server ?? 0), ...(cpuPct.postgres !== undefined ? { postgres: perMessage(cpuPct.postgres) } : {}) },
    };
  } finally {
    for (const v of all) v.controller.abort();
    replier?.closeAllConnections();
    replier?.close();
    await stopChild(server?.child);
    await dropSchemas();
  }
}

async function pgCommits(url: string): Promise<number> {
  return withPg(url, async (client) => {
    const { rows } = await client.query<{ n: string }>('SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()');
    return Number(rows[0]?.n ?? 0);
  });
}

export function webchatPlan(db: DbKind, quick: boolean): WebchatPlan {
  const seconds = quick ? 10 : 20;
  return db === 'postgres' ? { visitors: 1_000, rate: 100, seconds } : { visitors: 1_000, rate: 20, seconds };
}

export function printWebchat(results: WebchatResult[]): void {
  if (results.length === 0) return;
  const col = (f: (r: WebchatResult) => string) => results.map(f);
  printTable('Scenario webchat — visitors on SSE, each message answered by the auto-reply example (issue 43)', ['', ...results.map((r) => dbLabel(r.db))], [
    ['visitors × rate × duration', ...col((r) => `${fmt(r.plan.visitors)} × ${fmt(r.plan.rate)}/s × ${r.plan.seconds} s`)],
    ['streams connected in', ...col((r) => `${fmt(r.connectMs)} ms`)],
    ['RSS idle → connected (per visitor)', ...col((r) => `${fmt(r.rssBeforeMb, 1)} → ${fmt(r.rssIdleMb, 1)} MB (${fmt(r.rssPerVisitorKb, 1)} KB)`)],
    ['messages (refused) at offered rate', ...col((r) => `${fmt(r.messages)} (${r.refused}) at ${fmt(r.offeredRate)}/s`)],
    ['message → reply shown p50 / p99 / max', ...col((r) => `${fmt(r.replyP50Ms)} / ${fmt(r.replyP99Ms)} / ${fmt(r.replyMaxMs)} ms`)],
    ['message → own echo shown p50 / p99', ...col((r) => `${fmt(r.echoP50Ms)} / ${fmt(r.echoP99Ms)} ms`)],
    ...STAGES.map((stage) => [`  ${FROM[stage] === 'start' ? 'message' : FROM[stage]} → ${stage} p50 / p99`, ...col((r) => `${fmt(r.stages[stage].p50)} / ${fmt(r.stages[stage].p99)} ms`)]),
    ['PostgreSQL commits per message', ...col((r) => (r.pgCommitsPerMessage === undefined ? '—' : fmt(r.pgCommitsPerMessage, 1)))],
    ['CPU ms per message server / pg', ...col((r) => `${fmt(r.cpuMsPerMessage.server, 2)} / ${r.cpuMsPerMessage.postgres === undefined ? '—' : fmt(r.cpuMsPerMessage.postgres, 2)}`)],
    ['CPU % server / bench / pg / other (machine)', ...col((r) => `${fmt(r.cpuPct.server)} / ${fmt(r.cpuPct.bench)} / ${fmt(r.cpuPct.postgres)} / ${fmt(r.cpuPct.other)} (${fmt(r.cpuPct.machine)} %)`)],
  ]);
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const db = arg('db', 'postgres') === 'pglite' ? 'pglite' : 'postgres';
  const result = await runWebchat(db, process.env.DATABASE_URL ?? DEFAULT_POSTGRES_URL, {
    visitors: Number(arg('visitors', '1000')),
    rate: Number(arg('rate', '100')),
    seconds: Number(arg('seconds', '20')),
  });
  printWebchat([result]);
  console.log(JSON.stringify(result));
  process.exit(0);
}
