/**
 * Scenario `inbound`: guests' WhatsApp messages arriving as Meta posts them. Signed `whatsapp_business_account`
 * callbacks (one message each, from 500 guests, Meta's documented shape) go to `POST /providers/meta/webhook` at a
 * fixed rate (PostgreSQL 1,000 messages/s, PGlite 200/s; 30 s, 10 s with --quick) over keep-alive connections, open
 * loop: a slow answer does not slow the sender, as Meta does not wait. Measured: every callback's
 * acknowledgement (p50/p99, non-200), that each message is stored once, and message → `message.created` at a
 * subscribed receiver (the callback's send time to the webhook's arrival; p50/p99), with CPU shares.
 * Targets (issue 41): PostgreSQL ack p99 < 100 ms and arrival p99 < 1 s at 1,000/s; PGlite the same at 200/s.
 * Then, on PostgreSQL, outbound: replies to those guests' conversations queued by an API node, then sent by a worker
 * node through a fake Graph API (test/helpers/fake-graph.ts, in this process) that answers each call after 50 ms:
 * sends per second from the first to the last call it received (target: at least 1,000/s).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';
import type { Timing } from './api.js';
import { CpuMeter, fmt, log, percentile, printTable, round, sleep, type DbKind } from './lib.js';
import { call, dbLabel, newSchema, startReceiver, startServer, stopChild, type Server } from './procs.js';
import { startFakeGraph, type FakeGraph } from '../test/helpers/fake-graph.js';

const GUESTS = 500;
const PHONE_NUMBER_ID = '104400000000001';
const WABA_ID = '204400000000001';
const GRAPH_TOKEN = 'bench-token';
/** How long the fake Graph API takes to answer each call. */
const GRAPH_DELAY_MS = 50;

export interface InboundResult {
  db: DbKind;
  rate: number;
  seconds: number;
  sent: number;
  acknowledged: number;
  non200: number;
  errors: number;
  ackP50Ms: number;
  ackP99Ms: number;
  stored: number;
  storedTwice: number;
  delivered: number;
  arrivalP50Ms: number;
  arrivalP99Ms: number;
  /** Seconds from the last callback sent to the last message.created received. */
  tailS: number;
  cpuPct: Record<string, number>;
  /** PostgreSQL only. */
  outbound?: OutboundResult;
}

export interface OutboundResult {
  replies: number;
  /** Replies accepted (202) per second while they were posted. */
  acceptedPerS: number;
  non202: number;
  sent: number;
  /** Graph API calls per second, first to last. */
  sendsPerS: number;
  /** The most Graph API calls in flight at once. */
  peakInFlight: number;
  cpuPct: Record<string, number>;
}

function callback(index: number, sentAtMs: number): { wamid: string; body: string } {
  const guest = index % GUESTS;
  const waId = `3460${String(1_000_000 + guest).padStart(7, '0')}`;
  const wamid = `wamid.bench${index}_${randomBytes(6).toString('hex')}`;
  const payload = {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: WABA_ID,
        changes: [
          {
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '34910000001', phone_number_id: PHONE_NUMBER_ID },
              contacts: [{ profile: { name: `Guest ${guest}` }, wa_id: waId }],
              messages: [{ from: waId, id: wamid, timestamp: String(Math.floor(sentAtMs / 1000)), type: 'text', text: { body: `Hello, is breakfast included? (${index})` } }],
            },
          },
        ],
      },
    ],
  };
  return { wamid, body: JSON.stringify(payload) };
}

export async function runInbound(db: DbKind, postgresUrl: string | undefined, timing: Timing, quick: boolean): Promise<InboundResult> {
  const schema = db === 'postgres' ? newSchema(postgresUrl!) : undefined;
  const dbEnv: Record<string, string> = db === 'postgres' ? { DATABASE_URL: postgresUrl!, DATABASE_SCHEMA: schema! } : { DATA_DIR: 'memory://' };
  const rate = db === 'postgres' ? 1_000 : 200;
  const seconds = quick ? 10 : 30;
  const appSecret = randomBytes(32).toString('hex');
  let server: Server | undefined;
  const graph = await startFakeGraph();
  graph.addWhatsAppNumber({ phoneNumberId: PHONE_NUMBER_ID, wabaId: WABA_ID, token: GRAPH_TOKEN });
  const receiver = await startReceiver(`inbound-receiver-${db}`);
  const agent = new Agent({ connections: 64, pipelining: 1, keepAliveTimeout: 30_000 });
  try {
    log(`inbound/${db}: starting server (--role all)`);
    // The Graph API is the fake one: nothing leaves the machine.
    const serverEnv = { META_APP_SECRET: appSecret, META_GRAPH_BASE_URL: graph.baseUrl };
    server = await startServer(`inbound-${db}`, 'all', dbEnv, serverEnv, { compiled: true });
    const base = server.baseUrl;
    const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name: 'Bench Inbound Hotel' } });
    await call(base, 'POST', `/admin/v1/tenants/${tenantId}/channels`, {
      body: { kind: 'whatsapp', name: 'WhatsApp', provider: 'whatsapp_cloud', connection: { phoneNumberId: PHONE_NUMBER_ID, wabaId: WABA_ID, accessToken: GRAPH_TOKEN } },
    });
    const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'bench', scopes: ['webhooks:write', 'conversations:write', 'messages:read'] } });
    await call(base, 'POST', '/m2m/v1/webhooks', { token: key, body: { url: receiver.url, events: ['message.created'], description: 'bench inbound' } });
    const url = `${base}/providers/meta/webhook`;
    const send = async (index: number, sentAtMs: number) => {
      const { wamid, body } = callback(index, sentAtMs);
      const signature = `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`;
      const response = await request(url, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature }, body });
      await response.body.text();
      return { wamid, status: response.statusCode };
    };
    // Warm-up at a tenth of the rate: the routes compile, the guests' conversations exist.
    for (let i = 0; i < GUESTS; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => send(1_000_000 + i + j, Date.now())));
    await sleep(timing.warmupS * 1000);
    await receiver.reset();

    log(`inbound/${db}: ${fmt(rate)} signed callbacks/s for ${seconds} s`);
    const total = rate * seconds;
    const sentAt: number[] = [];
    const acks: number[] = [];
    let non200 = 0;
    let errors = 0;
    const inFlight: Array<Promise<void>> = [];
    const meter = new CpuMeter({ server: server.pid, receiver: receiver.child.pid, bench: process.pid }, db === 'postgres');
    const started = Date.now();
    const tickMs = 10;
    for (let sent = 0; sent < total; ) {
      const due = Math.min(total, Math.floor(((Date.now() - started) / 1000) * rate) + 1);
      for (; sent < due; sent++) {
        const at = Date.now();
        const index = sent;
        inFlight.push(
          send(index, at).then(
            ({ status }) => {
              acks.push(Date.now() - at);
              sentAt[index] = at;
              if (status !== 200) non200++;
            },
            () => void errors++,
          ),
        );
      }
      await sleep(tickMs);
    }
    await Promise.all(inFlight);
    const lastSent = Date.now();
    // Processing keeps up when the receiver has every message.created soon after the last callback.
    let stats = await receiver.stats();
    const cap = Date.now() + 120_000;
    while (stats.unique < total && Date.now() < cap) {
      await sleep(250);
      stats = await receiver.stats();
    }
    const cpuPct = meter.stop();
    const tailS = round((stats.last - lastSent) / 1000, 2);
    const stored = await storedMessages(base, key);
    const arrivals = await receiver.arrivals();
    const latencies: number[] = [];
    for (const [arrival, , messageId] of Object.values(arrivals)) {
      const index = messageId ? stored.indexOf.get(messageId) : undefined;
      const at = index === undefined ? undefined : sentAt[index];
      if (at !== undefined) latencies.push(arrival - at);
    }
    latencies.sort((a, b) => a - b);
    acks.sort((a, b) => a - b);
    let outbound: OutboundResult | undefined;
    if (db === 'postgres') {
      log(`inbound/${db}: outbound replies, sent to the fake Graph API answering in ${GRAPH_DELAY_MS} ms`);
      await stopChild(server.child);
      outbound = await runOutbound(dbEnv, serverEnv, key, stored.conversationIds, graph, quick ? 5 : 10);
    }
    const result: InboundResult = {
      db,
      rate,
      seconds,
      sent: total,
      acknowledged: acks.length,
      non200,
      errors,
      ackP50Ms: round(percentile(acks, 50), 1),
      ackP99Ms: round(percentile(acks, 99), 1),
      stored: stored.indexOf.size,
      storedTwice: stored.twice,
      delivered: latencies.length,
      arrivalP50Ms: round(percentile(latencies, 50)),
      arrivalP99Ms: round(percentile(latencies, 99)),
      tailS,
      cpuPct,
      outbound,
    };
    log(
      `inbound/${db}: ${fmt(result.acknowledged)} acknowledged (ack p50 ${result.ackP50Ms} ms, p99 ${result.ackP99Ms} ms, non-200 ${non200}, errors ${errors}); ` +
        `${fmt(result.stored)} stored (${result.storedTwice} twice); ${fmt(result.delivered)} message.created received, callback→receipt p50 ${result.arrivalP50Ms} ms, p99 ${result.arrivalP99Ms} ms; ` +
        (outbound ? `outbound ${fmt(outbound.sent)} of ${fmt(outbound.replies)} replies sent, ${fmt(outbound.sendsPerS)} sends/s` : 'no outbound phase'),
    );
    return result;
  } finally {
    await agent.close();
    await stopChild(server?.child);
    await stopChild(receiver.child);
    await graph.close();
  }
}

/**
 * Outbound (PostgreSQL): replies to the guests' conversations (their windows are open: the guests just wrote) are
 * queued by an API node alone (`--role api`, 32 connections, a fresh Idempotency-Key each, for `seconds`); then a
 * worker node (`--role worker`) sends them to the fake Graph API, which answers each call after GRAPH_DELAY_MS:
 * sends per second from the first call to the last, as the replies scenario drains its backlog.
 */
async function runOutbound(dbEnv: Record<string, string>, env: Record<string, string>, key: string, conversationIds: readonly string[], graph: FakeGraph, seconds: number): Promise<OutboundResult> {
  const calls = () => graph.sent(PHONE_NUMBER_ID, 'messages');
  const before = calls().length;
  let node: Server | undefined;
  const agent = new Agent({ connections: 32, pipelining: 1, keepAliveTimeout: 30_000 });
  try {
    node = await startServer('inbound-outbound-api', 'api', dbEnv, env, { compiled: true });
    const base = node.baseUrl;
    let replies = 0;
    let non202 = 0;
    const started = Date.now();
    const until = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (Date.now() < until) {
          const index = replies++;
          const conversationId = conversationIds[index % conversationIds.length];
          const response = await request(`${base}/m2m/v1/conversations/${conversationId}/messages`, {
            method: 'POST',
            dispatcher: agent,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': `bench-out-${index}` },
            body: JSON.stringify({ text: `Yes, breakfast is included (${index}).` }),
          });
          await response.body.text();
          if (response.statusCode !== 202) non202++;
        }
      }),
    );
    const acceptedPerS = round((replies - non202) / ((Date.now() - started) / 1000));
    await stopChild(node.child);
    graph.setDelay(GRAPH_DELAY_MS);
    node = await startServer('inbound-outbound-worker', 'worker', dbEnv, env, { compiled: true });
    const meter = new CpuMeter({ worker: node.pid, bench: process.pid }, true);
    const accepted = replies - non202;
    const cap = Date.now() + 120_000;
    while (calls().length - before < accepted && Date.now() < cap) await sleep(100);
    const cpuPct = meter.stop();
    const made = calls().slice(before);
    const times = made.map((r) => r.at).sort((a, b) => a - b);
    const spanS = times.length > 1 ? (times[times.length - 1] - times[0]) / 1000 : 0;
    // Calls arriving within one answer's delay of each other were in flight together.
    let peakInFlight = 0;
    for (let first = 0, last = 0; last < times.length; last++) {
      while (times[last] - times[first] >= GRAPH_DELAY_MS) first++;
      peakInFlight = Math.max(peakInFlight, last - first + 1);
    }
    return { replies, acceptedPerS, non202, sent: made.length, sendsPerS: spanS > 0 ? round(made.length / spanS) : 0, peakInFlight, cpuPct };
  } finally {
    graph.setDelay(0);
    await agent.close();
    await stopChild(node?.child);
  }
}

/**
 * Every message the bench sent, read back through the public API: our message id → the bench's index (in its text),
 * and how many indexes were stored more than once. The same on both databases.
 */
async function storedMessages(base: string, key: string): Promise<{ indexOf: Map<string, number>; twice: number; conversationIds: string[] }> {
  const indexOf = new Map<string, number>();
  const conversationIds: string[] = [];
  const seen = new Set<number>();
  let twice = 0;
  let cursor: string | undefined;
  do {
    const page = await call<{ conversations: Array<{ conversationId: string }>; nextCursor?: string }>(base, 'GET', `/m2m/v1/conversations?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { token: key });
    for (const { conversationId } of page.conversations) {
      conversationIds.push(conversationId);
      let before: string | undefined;
      do {
        const messages = await call<{ messages: Array<{ messageId: string; text?: string }>; nextCursor?: string }>(
          base,
          'GET',
          `/m2m/v1/conversations/${conversationId}/messages?limit=100${before ? `&cursor=${before}` : ''}`,
          { token: key },
        );
        for (const message of messages.messages) {
          const index = Number(/\((\d+)\)$/.exec(message.text ?? '')?.[1] ?? NaN);
          if (!Number.isInteger(index) || index >= 1_000_000) continue;
          if (seen.has(index)) twice++;
          seen.add(index);
          indexOf.set(message.messageId, index);
        }
        before = messages.nextCursor;
      } while (before);
    }
    cursor = page.nextCursor;
  } while (cursor);
  return { indexOf, twice, conversationIds };
}

export function printInbound(results: InboundResult[]): void {
  if (results.length === 0) return;
  const col = (f: (r: InboundResult) => string) => results.map(f);
  printTable(
    'Scenario inbound — signed WhatsApp callbacks (one message each) at a fixed rate',
    ['', ...results.map((r) => dbLabel(r.db))],
    [
      ['rate × duration', ...col((r) => `${fmt(r.rate)}/s × ${r.seconds} s`)],
      ['acknowledged / sent (non-200, errors)', ...col((r) => `${fmt(r.acknowledged)} / ${fmt(r.sent)} (${r.non200}, ${r.errors})`)],
      ['ack p50 / p99', ...col((r) => `${r.ackP50Ms} / ${r.ackP99Ms} ms`)],
      ['stored / stored twice', ...col((r) => `${fmt(r.stored)} / ${r.storedTwice}`)],
      ['message.created received', ...col((r) => fmt(r.delivered))],
      ['callback → receipt p50 / p99', ...col((r) => `${fmt(r.arrivalP50Ms)} / ${fmt(r.arrivalP99Ms)} ms`)],
      ['last callback → last receipt', ...col((r) => `${r.tailS} s`)],
      ['CPU % server / receiver / bench / pg / other', ...col((r) => `${fmt(r.cpuPct.server)} / ${fmt(r.cpuPct.receiver)} / ${fmt(r.cpuPct.bench)} / ${fmt(r.cpuPct.postgres ?? 0)} / ${fmt(r.cpuPct.other)}`)],
      ['outbound: replies queued/s by the API node (non-202)', ...col((r) => (r.outbound ? `${fmt(r.outbound.acceptedPerS)} (${r.outbound.non202})` : '—'))],
      [`outbound: sends/s by the worker node, Graph API answering in ${GRAPH_DELAY_MS} ms`, ...col((r) => (r.outbound ? `${fmt(r.outbound.sendsPerS)} (${fmt(r.outbound.sent)} of ${fmt(r.outbound.replies)}; at most ${r.outbound.peakInFlight} in flight)` : '—'))],
      ['outbound CPU % worker / bench / pg / other', ...col((r) => (r.outbound ? `${fmt(r.outbound.cpuPct.worker)} / ${fmt(r.outbound.cpuPct.bench)} / ${fmt(r.outbound.cpuPct.postgres ?? 0)} / ${fmt(r.outbound.cpuPct.other)}` : '—'))],
    ],
  );
}
