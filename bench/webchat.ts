/**
 * Webchat at scale on one node (issue 43): N visitors connected by Server-Sent Events at once, each visitor message
 * answered by the auto-reply example (packages/client/examples/auto-reply.ts) through the API and the webchat
 * provider; measures visitor message → reply event in that visitor's stream, and the server's RSS per idle
 * connected visitor. Standalone (not yet a scenario of bench/run.ts):
 *   node --import tsx bench/webchat.ts [--visitors 1000] [--rate 100] [--seconds 20] [--db postgres|pglite]
 */
import type { AddressInfo } from 'node:net';
import { M2MClient } from '../packages/client/src/index.js';
import { createAutoReplier } from '../packages/client/examples/auto-reply.js';
import { CpuMeter, DEFAULT_POSTGRES_URL, rssKb, sleep, summarise } from './lib.js';
import { call, dropSchemas, newSchema, startServer, stopChild } from './procs.js';

const ORIGIN = 'https://bench-hotel.example';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

interface Visitor {
  token: string;
  controller: AbortController;
  waiting: Array<{ sentAt: number; resolve: (ms: number) => void }>;
  /** The visitor's own message coming back on its stream (the webchat path alone, no webhook or reply). */
  echoes: Array<{ sentAt: number; resolve: (ms: number) => void }>;
}

async function openStream(base: string, visitor: Visitor): Promise<void> {
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
          if (block.includes('event: message') && block.includes('"direction":"inbound"')) {
            const echo = visitor.echoes.shift();
            echo?.resolve(performance.now() - echo.sentAt);
          }
          if (block.includes('event: message') && block.includes('"direction":"outbound"')) {
            const waiter = visitor.waiting.shift();
            waiter?.resolve(performance.now() - waiter.sentAt);
          }
        }
      }
    } catch {
      // aborted at the end
    }
  })();
  await ready;
}

async function main(): Promise<void> {
  const visitors = Number(arg('visitors', '1000'));
  const rate = Number(arg('rate', '100'));
  const seconds = Number(arg('seconds', '20'));
  const db = arg('db', 'postgres');
  const dbEnv: Record<string, string> = db === 'postgres' ? { DATABASE_URL: process.env.DATABASE_URL ?? DEFAULT_POSTGRES_URL, DATABASE_SCHEMA: newSchema(process.env.DATABASE_URL ?? DEFAULT_POSTGRES_URL) } : { DATA_DIR: 'memory://' };
  const server = await startServer('webchat', 'all', dbEnv, { WEBCHAT_RATE_LIMIT_PER_MINUTE: '1000', WEBHOOK_RETRY_DELAYS_MS: '200,200,200,200,200,200' });
  const base = server.baseUrl;
  const replier = { server: undefined as ReturnType<typeof createAutoReplier> | undefined };
  try {
    const { tenantId } = await call<{ tenantId: string }>(base, 'POST', '/admin/v1/tenants', { body: { name: 'Bench Hotel' } });
    const { key } = await call<{ key: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'bench', scopes: ['webhooks:write', 'conversations:write', 'messages:read'] } });
    const { widgetId } = await call<{ widgetId: string }>(base, 'POST', `/admin/v1/tenants/${tenantId}/channels`, {
      body: { kind: 'webchat', name: 'Site', provider: 'webchat', connection: { allowedOrigins: [ORIGIN] } },
    });
    const client = new M2MClient({ apiKey: key, baseUrl: `${base}/m2m/v1` });
    const subscription = await client.webhooks.create({ url: 'http://127.0.0.1:9/placeholder', events: ['message.created'] });
    replier.server = createAutoReplier({ client, secret: subscription.secret!, onOutcome: () => undefined });
    await new Promise<void>((resolve) => replier.server!.listen(0, '127.0.0.1', resolve));
    await client.webhooks.update({ subscriptionId: subscription.subscriptionId, url: `http://127.0.0.1:${(replier.server.address() as AddressInfo).port}/hook` });

    const all: Visitor[] = [];
    for (let i = 0; i < visitors; i++) {
      const res = await fetch(`${base}/webchat/v1/sessions`, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'application/json' }, body: JSON.stringify({ widgetId }) });
      const { sessionToken } = (await res.json()) as { sessionToken: string };
      all.push({ token: sessionToken, controller: new AbortController(), waiting: [], echoes: [] });
    }
    await sleep(3_000);
    const rssBefore = rssKb(server.pid) ?? 0;
    const connectStarted = performance.now();
    for (let i = 0; i < all.length; i += 50) await Promise.all(all.slice(i, i + 50).map((v) => openStream(base, v)));
    const connectMs = performance.now() - connectStarted;
    await sleep(5_000);
    const rssIdle = rssKb(server.pid) ?? 0;
    console.log(`${visitors} streams connected in ${Math.round(connectMs)} ms; server RSS ${Math.round(rssBefore / 1024)} MB → ${Math.round(rssIdle / 1024)} MB: ${((rssIdle - rssBefore) / visitors).toFixed(1)} KB per connected visitor`);

    // Warm-up: one message, so the first measured ones do not pay for lazy starts.
    const warm = all[0];
    const warmed = new Promise<number>((resolve) => warm.waiting.push({ sentAt: performance.now(), resolve }));
    warm.echoes.push({ sentAt: performance.now(), resolve: () => undefined });
    await fetch(`${base}/webchat/v1/messages`, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'application/json', authorization: `Bearer ${warm.token}` }, body: JSON.stringify({ text: 'warm-up' }) });
    await warmed;

    const total = rate * seconds;
    const latencies: Array<Promise<number>> = [];
    const echoes: Array<Promise<number>> = [];
    const cpu = new CpuMeter({ server: server.pid, bench: process.pid }, db === 'postgres');
    const started = performance.now();
    let failed = 0;
    for (let n = 0; n < total; n++) {
      const due = started + (n * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const visitor = all[n % all.length];
      const sentAt = performance.now();
      latencies.push(new Promise<number>((resolve) => visitor.waiting.push({ sentAt, resolve })));
      echoes.push(new Promise<number>((resolve) => visitor.echoes.push({ sentAt, resolve })));
      void fetch(`${base}/webchat/v1/messages`, {
        method: 'POST',
        headers: { origin: ORIGIN, 'content-type': 'application/json', authorization: `Bearer ${visitor.token}` },
        body: JSON.stringify({ text: `Is breakfast included? (${n})` }),
      }).then((res) => {
        if (res.status !== 201) failed++;
        return res.arrayBuffer();
      });
    }
    const offered = (total / (performance.now() - started)) * 1000;
    const results = await Promise.race([Promise.all(latencies), sleep(120_000).then(() => undefined)]);
    const shares = cpu.stop();
    if (!results) throw new Error('replies did not all arrive within 120 s');
    const s = summarise([...results].sort((a, b) => a - b));
    console.log(`${total} messages at ${offered.toFixed(0)}/s (${failed} refused): message → reply in the visitor's stream p50 ${s.p50.toFixed(0)} ms, p99 ${s.p99.toFixed(0)} ms, max ${s.max.toFixed(0)} ms`);
    const e = summarise(await Promise.all(echoes));
    console.log(`visitor message → its own echo on the stream (webchat path alone): p50 ${e.p50.toFixed(0)} ms, p99 ${e.p99.toFixed(0)} ms`);
    console.log(`CPU (% of one core): ${JSON.stringify(shares)}`);
    for (const v of all) v.controller.abort();
  } finally {
    replier.server?.closeAllConnections();
    replier.server?.close();
    await stopChild(server.child);
    await dropSchemas();
  }
}

await main();
