/**
 * Scenario `nodes` (issue 22): two `--role api` and two `--role worker` processes of the compiled server on one
 * PostgreSQL database, sharing the rate limit through Redis, under mixed load (a webhook burst, message sends
 * to a fake WhatsApp Graph API, a website crawl). One worker and one API node are SIGKILLed in the middle and
 * started again. Then: every acknowledged event reached the receiver, no message went to the provider twice,
 * no job or delivery is left behind, and one key's limit held across both API nodes.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { buildSite, serve } from './crawl.js';
import { fmt, log, printTable, sleep } from './lib.js';
import { ADMIN_TOKEN, call, newSchema, startServer, stopChild, withPg, type Server } from './procs.js';

export interface NodesResult {
  events: { acknowledged: number; delivered: number; lost: number; duplicates: number; deliveredBeforeKill: number };
  /** outcomeUnknown: sends whose worker died during the provider call, failed as send_outcome_unknown rather than sent again (docs/decisions.md). */
  sends: { accepted: number; sent: number; providerCalls: number; sentTwice: number; notSent: number; outcomeUnknown: number };
  crawl: { status: string; pagesProcessed: number };
  stuck: { jobs: number; deliveries: number; midCall: number };
  rateLimit: { burst: number; ratePerSecond: number; requests: number; allowed: number; elapsedS: number; allowedMax: number; perNodeWouldAllow: number };
  killedAt: { api: string; worker: string };
  seconds: number;
  ok: boolean;
}

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const SCOPES = ['webhooks:write', 'conversations:read', 'conversations:write', 'messages:read', 'knowledge:read', 'knowledge:write'];
const BURST = 200;
const RATE = 20;

/** A local HTTP server in the bench process; `handle` answers each request (body already read). */
async function local(handle: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void) {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, Buffer.concat(chunks).toString('utf8'), res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** fetch that reports failure instead of throwing (a killed node resets its connections). */
async function tryCall<T>(base: string, method: string, url: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T | undefined }> {
  try {
    const response = await fetch(`${base}${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as T) : undefined };
  } catch {
    return { status: 0, body: undefined };
  }
}

async function until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(250);
  }
  log(`nodes: timed out waiting for ${what}`);
  return false;
}

export async function runNodes(postgresUrl: string, quick: boolean): Promise<NodesResult> {
  const started = Date.now();
  const EVENTS = quick ? 600 : 1500;
  const SENDS = quick ? 60 : 150;
  const PAGES = quick ? 150 : 300;
  const schema = newSchema(postgresUrl);

  // The webhook receiver answers after 20 ms; it counts every arrival by event id.
  const arrivals = new Map<string, number>();
  const receiver = await local((req, _body, res) => {
    const id = String(req.headers['x-service-event-id'] ?? '');
    arrivals.set(id, (arrivals.get(id) ?? 0) + 1);
    setTimeout(() => res.writeHead(200).end('ok'), 20);
  });
  // The fake Graph API counts each message text it is asked to send (every send has its own text).
  const providerCalls = new Map<string, number>();
  const graph = await local((_req, body, res) => {
    const parsed = JSON.parse(body || '{}') as { text?: { body?: string }; template?: { components?: Array<{ parameters?: Array<{ text?: string }> }> } };
    const text = parsed.text?.body ?? parsed.template?.components?.[0]?.parameters?.[0]?.text ?? '';
    providerCalls.set(text, (providerCalls.get(text) ?? 0) + 1);
    setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ messages: [{ id: `wamid.${randomBytes(8).toString('hex')}` }] })), 30);
  });
  const site = await serve(buildSite(PAGES), 15);

  const env = {
    DATABASE_URL: postgresUrl,
    DATABASE_SCHEMA: schema,
    REDIS_URL,
    REDIS_KEY_PREFIX: `m2m-bench-nodes-${randomBytes(4).toString('hex')}:`,
    RATE_LIMIT_RPS: String(RATE),
    RATE_LIMIT_BURST: String(BURST),
    JOB_POLL_INTERVAL_MS: '200',
    WEBHOOK_RETRY_DELAYS_MS: '500,500,500,500,500,500',
    WEBHOOK_ATTEMPT_TIMEOUT_MS: '3000',
    WEBHOOK_MAX_IN_FLIGHT_PER_HOST: '8',
    META_SYSTEM_USER_TOKEN: 'bench-token',
    META_APP_SECRET: 'bench-app-secret',
    META_GRAPH_BASE_URL: graph.url,
    CRAWL_MAX_DELAY_MS: '0',
  };
  const servers = new Map<string, Server>();
  const start = async (name: string, role: 'api' | 'worker') => {
    const server = await startServer(name, role, {}, env, { compiled: true });
    servers.set(name, server);
    return server;
  };
  try {
    log(`nodes: starting 2 API and 2 worker processes (compiled) on PostgreSQL schema ${schema} with Redis`);
    let api1 = await start('nodes-api-1', 'api'); // applies the migrations
    const api2 = await start('nodes-api-2', 'api');
    const worker1 = await start('nodes-worker-1', 'worker');
    await start('nodes-worker-2', 'worker');
    const apis = () => [api1, api2];

    const { tenantId } = await call<{ tenantId: string }>(api1.baseUrl, 'POST', '/admin/v1/tenants', { body: { name: 'Nodes Hotel' } });
    const { key } = await call<{ key: string }>(api1.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'load', scopes: SCOPES } });
    const limited = await call<{ key: string }>(api1.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'limit', scopes: ['webhooks:read'] } });
    await call(api1.baseUrl, 'POST', '/m2m/v1/webhooks', { token: key, body: { url: `${receiver.url}/hook`, events: ['message.created'] } });
    const { channelId } = await call<{ channelId: string }>(api1.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/channels`, { body: { kind: 'whatsapp', name: 'Line', provider: 'whatsapp_cloud', connection: { phoneNumberId: '100200300400', wabaId: '100200300401' } } });
    await call(api1.baseUrl, 'PUT', `/admin/v1/tenants/${tenantId}/channels/${channelId}/templates/conversation_start`, {
      body: { category: 'UTILITY', locales: [{ locale: 'en_US', status: 'approved', ready: true }] },
    });
    const phones = Array.from({ length: SENDS }, (_, i) => `+5255${30_000_000 + i}`);
    for (let i = 0; i < SENDS; i += 20) {
      await Promise.all(phones.slice(i, i + 20).map((phone) => call(api1.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/contacts`, { body: { phone, consent: true } })));
    }

    // Mixed load: the burst, the sends and the crawl run together; a request a killed node drops is retried on another.
    const acknowledged: string[] = [];
    const acceptedSends: string[] = [];
    const emit = async (seq: number) => {
      for (let attempt = 0; attempt < 20; attempt += 1) {
        const node = apis()[(seq + attempt) % 2];
        const r = await tryCall<{ eventId: string }>(node.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/webhook-events`, ADMIN_TOKEN, {
          type: 'message.created',
          data: { messageId: `msg_nodes_${seq}`, conversationId: 'conv_nodes', direction: 'inbound', channel: 'whatsapp' },
        });
        if (r.status === 201 || r.status === 200) return void acknowledged.push(r.body!.eventId);
        await sleep(100);
      }
    };
    const send = async (i: number) => {
      const idempotencyKey = randomUUID();
      // A request the killed node held keeps its Idempotency-Key locked until the lock is stale (60 s).
      const deadline = Date.now() + 90_000;
      for (let attempt = 0; Date.now() < deadline; attempt += 1) {
        const node = apis()[(i + attempt) % 2];
        // The same Idempotency-Key on a retry: a request the killed node had accepted is not made twice.
        const r = await tryCall<{ requestEventId: string }>(
          node.baseUrl,
          'POST',
          '/m2m/v1/conversations/start',
          key,
          { channelId, recipientPhone: phones[i], locale: 'en_US', messageText: `nodes-send-${i}` },
          { 'idempotency-key': idempotencyKey },
        );
        if (r.status === 202) return void acceptedSends.push(r.body!.requestEventId);
        await sleep(500);
      }
    };
    const crawl = await call<{ job: { jobId: string } }>(api2.baseUrl, 'POST', '/m2m/v1/knowledge/url/crawl', { token: key, body: { rootUrl: site.url, crawlDepth: 10, maxPages: PAGES } });
    const pool = async (count: number, width: number, fn: (i: number) => Promise<void>) => {
      let next = 0;
      await Promise.all(Array.from({ length: width }, async () => {
        while (next < count) await fn(next++);
      }));
    };
    const load = Promise.all([pool(EVENTS, 8, emit), pool(SENDS, 2, send)]);

    await until('part of the burst to arrive', 60_000, async () => arrivals.size >= EVENTS * 0.2);
    const deliveredBeforeKill = arrivals.size;
    log(`nodes: ${deliveredBeforeKill} events delivered, ${acceptedSends.length} sends accepted: SIGKILL nodes-worker-1 and nodes-api-1`);
    worker1.child.kill('SIGKILL');
    api1.child.kill('SIGKILL');
    const killedAt = { api: `${acknowledged.length} events acknowledged`, worker: `${deliveredBeforeKill} events delivered` };
    await sleep(1_000);
    api1 = await start('nodes-api-1-restarted', 'api');
    await start('nodes-worker-1-restarted', 'worker');
    log('nodes: both restarted');
    await load;
    log(`nodes: load done: ${acknowledged.length}/${EVENTS} events acknowledged, ${acceptedSends.length}/${SENDS} sends accepted`);

    // One key's limit across both API nodes: BURST requests and a little refill, not twice that.
    const rateStarted = Date.now();
    const requests = BURST * 2;
    let allowed = 0;
    await pool(requests, 8, async (i) => {
      const r = await tryCall(apis()[i % 2].baseUrl, 'GET', '/m2m/v1/webhooks', limited.key);
      if (r.status === 200) allowed += 1;
    });
    const elapsedS = (Date.now() - rateStarted) / 1000;
    const allowedMax = BURST + Math.ceil(elapsedS * RATE);
    log(`nodes: rate limit: ${allowed} of ${requests} allowed in ${elapsedS.toFixed(1)} s (one shared bucket allows at most ${allowedMax})`);

    // Everything settles: leases of the killed worker expire and the survivors finish its work.
    const ackSet = new Set(acknowledged);
    await until('every acknowledged event to arrive', 180_000, async () => [...ackSet].every((id) => arrivals.has(id)));
    let crawlStatus = 'unknown';
    let pagesProcessed = 0;
    await until('the crawl to finish', 180_000, async () => {
      const r = await tryCall<{ job: { status: string; progress?: { pagesProcessed?: number } } }>(api2.baseUrl, 'GET', `/m2m/v1/knowledge/url/crawl/${crawl.job.jobId}`, key);
      crawlStatus = r.body?.job.status ?? crawlStatus;
      pagesProcessed = r.body?.job.progress?.pagesProcessed ?? pagesProcessed;
      return crawlStatus === 'completed' || crawlStatus === 'failed';
    });
    const statuses = new Map<string, string>();
    await until('every send to finish', 120_000, async () => {
      for (const id of acceptedSends) {
        if (statuses.get(id) === 'sent' || statuses.get(id) === 'failed') continue;
        const r = await tryCall<{ status: string }>(api2.baseUrl, 'GET', `/m2m/v1/message-requests/${id}/status`, key);
        if (r.body?.status) statuses.set(id, r.body.status);
      }
      return acceptedSends.every((id) => ['sent', 'failed', 'delivered', 'read'].includes(statuses.get(id) ?? ''));
    });
    await sleep(2_000);
    const stuck = await withPg(postgresUrl, async (client) => {
      const jobs = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${schema}.jobs WHERE (state = 'queued' AND run_at < now() - interval '30 seconds') OR (state = 'running' AND locked_until < now())`,
      );
      const deliveries = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.webhook_deliveries WHERE status = 'pending'`);
      const midCall = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.message_requests WHERE unknown_outcomes > 0`);
      return { jobs: jobs.rows[0].n, deliveries: deliveries.rows[0].n, midCall: midCall.rows[0].n };
    });

    const lost = [...ackSet].filter((id) => !arrivals.has(id)).length;
    const duplicates = [...arrivals.values()].reduce((sum, n) => sum + (n > 1 ? n - 1 : 0), 0);
    const sentTwice = [...providerCalls.values()].filter((n) => n > 1).length;
    const sent = [...statuses.values()].filter((s) => s !== 'failed').length;
    const result: NodesResult = {
      events: { acknowledged: acknowledged.length, delivered: [...ackSet].filter((id) => arrivals.has(id)).length, lost, duplicates, deliveredBeforeKill },
      sends: { accepted: acceptedSends.length, sent, providerCalls: [...providerCalls.values()].reduce((a, b) => a + b, 0), sentTwice, notSent: acceptedSends.length - sent, outcomeUnknown: stuck.midCall },
      crawl: { status: crawlStatus, pagesProcessed },
      stuck,
      rateLimit: { burst: BURST, ratePerSecond: RATE, requests, allowed, elapsedS: Math.round(elapsedS * 10) / 10, allowedMax, perNodeWouldAllow: Math.min(requests, 2 * BURST) },
      killedAt,
      seconds: Math.round((Date.now() - started) / 1000),
      ok: false,
    };
    result.ok =
      lost === 0 && acknowledged.length === EVENTS && sentTwice === 0 && result.sends.notSent === stuck.midCall && acceptedSends.length === SENDS &&
      crawlStatus === 'completed' && stuck.jobs === 0 && stuck.deliveries === 0 && allowed >= BURST && allowed <= allowedMax;
    return result;
  } finally {
    await Promise.all([...servers.values()].map((server) => stopChild(server.child)));
    await receiver.close();
    await graph.close();
    await site.close();
  }
}

export function printNodes(result: NodesResult | undefined): void {
  if (!result) return;
  const r = result;
  printTable(
    `Scenario nodes — 2 API + 2 worker processes, PostgreSQL + Redis, worker and API node SIGKILLed mid-load and restarted (${r.seconds} s): ${r.ok ? 'PASS' : 'FAIL'}`,
    ['check', 'figures', 'expected'],
    [
      ['no event lost', `${fmt(r.events.delivered)} of ${fmt(r.events.acknowledged)} acknowledged events arrived (${fmt(r.events.deliveredBeforeKill)} before the kill); ${fmt(r.events.duplicates)} repeated arrivals`, 'all arrive (repeats allowed: at least once)'],
      ['no send made twice', `${fmt(r.sends.accepted)} accepted, ${fmt(r.sends.sent)} sent; ${fmt(r.sends.providerCalls)} provider calls; ${fmt(r.sends.sentTwice)} texts sent twice; ${fmt(r.sends.outcomeUnknown)} failed as send_outcome_unknown (their worker died during the provider call)`, '0 twice; every other send sent'],
      ['crawl', `${r.crawl.status}, ${fmt(r.crawl.pagesProcessed)} pages`, 'completed'],
      ['no job stuck', `${fmt(r.stuck.jobs)} jobs overdue or with an expired lease; ${fmt(r.stuck.deliveries)} deliveries pending`, '0 and 0'],
      ['one limit per key', `${fmt(r.rateLimit.allowed)} of ${fmt(r.rateLimit.requests)} allowed in ${r.rateLimit.elapsedS} s (burst ${r.rateLimit.burst}, ${r.rateLimit.ratePerSecond}/s)`, `${r.rateLimit.burst}–${r.rateLimit.allowedMax} (per-node buckets: up to ${r.rateLimit.perNodeWouldAllow})`],
    ],
  );
}
