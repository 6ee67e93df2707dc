/**
 * `npm run bench -- [--only api|webhooks|conversations|knowledge|crawl|abuse|replies|events|recover|devstart|ops|nodes|search|inbound|webchat[,…]] [--db pglite|postgres|both] [--quick]`
 * Runs the scenarios against the real server in child processes on 127.0.0.1, prints tables and writes
 * .bench/results.json. See bench/README.md for what each figure means.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { printAbuse, runAbuse, type AbuseResult } from './abuse.js';
import { runApi, type ApiResult, type Timing } from './api.js';
import { conversationPlan, printConversations, runConversations, type ConversationsResult } from './conversations.js';
import { killCrawlChildren, printCrawl, runCrawl, type CrawlSummary } from './crawl.js';
import { printDevStart, runDevStart, type DevStartResult } from './devstart.js';
import { printKnowledge, runKnowledge, type KnowledgeResult } from './knowledge.js';
import { printReplies, runReplies, type RepliesResult } from './replies.js';
import { printEvents, runEvents, type EventsResult } from './events.js';
import { printRecover, runRecover, type RecoverResult } from './recover.js';
import { printOps, runOps, type OpsResult } from './ops.js';
import { printNodes, runNodes, type NodesResult } from './nodes.js';
import { printSearch, runSearch, type SearchResult } from './search.js';
import { printInbound, runInbound, type InboundResult } from './inbound.js';
import { printWebchat, runWebchat, webchatPlan, type WebchatResult } from './webchat.js';
import { CpuMeter, OUT_DIR, SCENARIOS, fmt, log, parseArgs, printTable, round, sleep, type DbKind, type Scenario } from './lib.js';
import { dbLabel, detectPostgres, dropSchemas, killAllChildren, stopAllChildren } from './procs.js';
import { printTargets, targets } from './report.js';
import { runWebhooks, type WebhookPlan, type WebhookResult } from './webhooks.js';

function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable url)';
  }
}

function webhookPlan(db: DbKind, quick: boolean): WebhookPlan {
  if (db === 'postgres') return quick ? { pending: 20_000, drainCapS: 60, rate: 1_000, latencyS: 3 } : { pending: 100_000, drainCapS: 150, rate: 1_000, latencyS: 10 };
  return quick ? { pending: 2_000, drainCapS: 60, rate: 200, latencyS: 3 } : { pending: 10_000, drainCapS: 130, rate: 200, latencyS: 10 };
}

function printApi(results: ApiResult[]): void {
  if (results.length === 0) return;
  const rows: string[][] = [];
  for (const r of results) {
    const add = (what: string, load: ApiResult['route'], ratio?: number) =>
      rows.push([
        dbLabel(r.db),
        what,
        String(load.connections),
        fmt(load.rps),
        `${load.p50Ms} ms`,
        `${load.p99Ms} ms`,
        fmt(load.non2xx),
        fmt(load.errors + load.timeouts),
        ratio === undefined ? '' : `${fmt(ratio, 3)}×`,
        `${fmt(load.cpuPct.server)} / ${fmt(load.cpuPct.bench)} / ${fmt(load.cpuPct.postgres)} / ${fmt(load.cpuPct.other)}`,
      ]);
    add('real route', r.route);
    add('real route (CPU-bound, 1 conn)', r.routeSingle);
    add('minimal Fastify route (hash + 2 queries)', r.minimal, r.ratioVsMinimal);
    add('bare node:http, pre-serialised', r.bare, r.ratioVsBare);
    add('bare node:http, stringify(parse())', r.bareStringify, r.ratioVsBareStringify);
    for (const read of r.reads ?? []) {
      add(`${read.what} (${read.rows} rows)`, read.route);
      add(`  minimal route, same rounds`, read.minimal, read.ratioVsMinimal);
    }
  }
  const bytes = results.map((r) => `${dbLabel(r.db)} ${fmt(r.responseBytes)} B`).join(', ');
  printTable(
    `Scenario 1 — GET /m2m/v1/webhooks/{id}/deliveries?limit=50 (50 rows; ${bytes}) — "real ÷ row" = real route req/s ÷ this row's req/s`,
    ['database', 'target', 'conns', 'req/s', 'p50', 'p99', 'non-2xx', 'errors', 'real ÷ row', 'CPU % server/bench/pg/other'],
    rows,
  );
}

function printWebhooks(results: WebhookResult[]): void {
  if (results.length === 0) return;
  const col = (f: (r: WebhookResult) => string) => results.map(f);
  const headers = ['', ...results.map((r) => dbLabel(r.db))];
  const cpu = (x: Record<string, number>) =>
    `${fmt(x.worker ?? x.server)} / ${fmt(x.receiver)} / ${fmt(x.bench)} / ${fmt(x.postgres)} / ${fmt(x.other)} / ${fmt(x.iowait)} %`;
  const rss = (x: { startMb: number; maxMb: number; endMb: number }) => `${fmt(x.startMb, 1)} / ${fmt(x.maxMb, 1)} / ${fmt(x.endMb, 1)} MB`;
  printTable('Scenario 2a — drain of pending deliveries (worker started on a full queue)', headers, [
    ['pending deliveries seeded', ...col((r) => fmt(r.drain.pending))],
    ['seed time (direct SQL)', ...col((r) => `${fmt(r.drain.seedSeconds, 1)} s`)],
    ['api RSS before seed → with pending', ...col((r) => `${fmt(r.drain.apiRssBeforeSeedMb, 1)} → ${fmt(r.drain.apiRssPendingMb, 1)} MB`)],
    [
      'received (unique) / duplicates',
      ...col((r) => `${fmt(r.drain.received)} / ${fmt(r.drain.duplicates)}${r.drain.complete ? '' : ` INCOMPLETE (${fmt(r.drain.backlogCanceled)} canceled)`}`),
    ],
    ['first→last arrival', ...col((r) => `${fmt(r.drain.drainSeconds, 2)} s`)],
    ['deliveries/s', ...col((r) => fmt(r.drain.deliveriesPerSec))],
    ['worker spawn→last arrival', ...col((r) => `${fmt(r.drain.wallSeconds, 2)} s`)],
    ['worker RSS start / max / end', ...col((r) => rss(r.drain.workerRss))],
    ['row updates per delivery (PostgreSQL stats)', ...col((r) => fmt(r.drain.rowUpdatesPerDelivery, 1))],
    ['CPU % worker / receiver / bench / pg / other / iowait', ...col((r) => cpu(r.drain.cpuPct))],
  ]);
  printTable('Scenario 2b — commit-to-receipt latency at a fixed emit rate (queue empty, worker running)', headers, [
    ['target emit rate × duration', ...col((r) => `${fmt(r.latency.targetRate)}/s × ${r.latency.seconds} s`)],
    [
      'emitted (201) / attempted / failed',
      ...col((r) => {
        const reasons = Object.entries(r.latency.emitFailureReasons).map(([why, n]) => `${why} ×${n}`).join(', ');
        return `${fmt(r.latency.emitted)} / ${fmt(r.latency.attempted)} / ${fmt(r.latency.emitFailures)}${reasons ? ` (${reasons})` : ''}`;
      }),
    ],
    ['emits/s achieved', ...col((r) => fmt(r.latency.emitsPerSec))],
    ['emit response p50 / p99', ...col((r) => `${fmt(r.latency.emitP50Ms)} / ${fmt(r.latency.emitP99Ms)} ms`)],
    ['received / missing', ...col((r) => `${fmt(r.latency.received)} / ${fmt(r.latency.missing)}`)],
    ['deliveries/s', ...col((r) => fmt(r.latency.deliveriesPerSec))],
    ['commit→receipt p50 / p99 / max', ...col((r) => `${fmt(r.latency.commitToReceipt.p50Ms)} / ${fmt(r.latency.commitToReceipt.p99Ms)} / ${fmt(r.latency.commitToReceipt.maxMs)} ms`)],
    ['occurredAt→receipt p50 / p99 / max', ...col((r) => `${fmt(r.latency.occurredToReceipt.p50Ms)} / ${fmt(r.latency.occurredToReceipt.p99Ms)} / ${fmt(r.latency.occurredToReceipt.maxMs)} ms`)],
    ['worker RSS start / max / end', ...col((r) => rss(r.latency.workerRss))],
    ['CPU % server / receiver / bench / pg / other / iowait', ...col((r) => cpu(r.latency.cpuPct))],
  ]);
  const reduced = results.filter((r) => r.drain.pending < 100_000);
  for (const r of reduced) {
    const why = r.db === 'pglite' && r.drain.pending < 100_000
      ? ` (PGlite drained ${fmt(r.drain.deliveriesPerSec)}/s here: 100,000 would take ~${fmt(100_000 / Math.max(1, r.drain.deliveriesPerSec) / 60, 1)} min, beyond the time budget)`
      : ' (--quick)';
    console.log(`note: ${dbLabel(r.db)} drain used ${fmt(r.drain.pending)} pending deliveries, not 100,000${why}.`);
  }
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const startedAt = new Date();
  const postgresUrl = args.db === 'pglite' ? undefined : await detectPostgres();
  if (args.db === 'postgres' || args.db === 'both') {
    if (!postgresUrl) throw new Error('PostgreSQL requested but DATABASE_URL is unset and nothing answers at the default URL');
  }
  const dbs: DbKind[] = args.db === 'pglite' ? ['pglite'] : args.db === 'postgres' ? ['postgres'] : args.db === 'both' || postgresUrl ? ['pglite', 'postgres'] : ['pglite'];
  const timing: Timing = args.quick ? { warmupS: 1, measureS: 3, singleS: 2 } : { warmupS: 2, measureS: 10, singleS: 5 };
  const loadAverageBefore = os.loadavg().map((n) => round(n, 2));
  const idle = new CpuMeter({}, false);
  await sleep(1_000);
  const machineBusyBeforePct = idle.stop().machine ?? 0;
  if (machineBusyBeforePct > 15) {
    log(`WARNING: the machine was ${machineBusyBeforePct}% busy before the bench started (load average ${loadAverageBefore[0]}): other work will lower the figures; see the "other" CPU column`);
  }
  const scenarios: readonly Scenario[] = args.only ?? SCENARIOS;
  const runs = (scenario: Scenario) => scenarios.includes(scenario);
  log(`bench: databases ${dbs.join(', ')}${postgresUrl ? ` (PostgreSQL at ${redact(postgresUrl)})` : ''}; scenarios ${scenarios.join(', ')}${args.quick ? '; quick' : ''}; ${os.cpus().length} CPUs`);

  const api: ApiResult[] = [];
  const webhooks: WebhookResult[] = [];
  const conversations: ConversationsResult[] = [];
  const knowledge: KnowledgeResult[] = [];
  let crawl: CrawlSummary | undefined;
  const abuse: AbuseResult[] = [];
  let replies: RepliesResult | undefined;
  let devStart: DevStartResult | undefined;
  let ops: OpsResult | undefined;
  let nodes: NodesResult | undefined;
  let events: EventsResult | undefined;
  let recover: RecoverResult | undefined;
  const search: SearchResult[] = [];
  const inbound: InboundResult[] = [];
  const webchat: WebchatResult[] = [];
  const errors: Array<{ scenario: string; db: DbKind; message: string }> = [];
  const record = async (scenario: string, db: DbKind, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      errors.push({ scenario, db, message });
      log(`FAILED ${scenario}/${db}: ${message}`);
    }
  };

  try {
    if (runs('api')) {
      for (const db of dbs) await record('api', db, async () => void api.push(await runApi(db, postgresUrl, timing)));
    }
    if (runs('webhooks')) {
      for (const db of dbs) await record('webhooks', db, async () => void webhooks.push(await runWebhooks(db, postgresUrl, webhookPlan(db, args.quick))));
    }
    if (runs('conversations')) {
      for (const db of dbs) {
        await record('conversations', db, async () => void conversations.push(await runConversations(db, postgresUrl, timing, conversationPlan(db, args.quick))));
      }
    }
    if (runs('knowledge')) {
      for (const db of dbs) await record('knowledge', db, async () => void knowledge.push(await runKnowledge(db, postgresUrl, timing)));
    }
    if (runs('crawl')) {
      // Once: on PostgreSQL when it is among the databases (our crawl job stores there), else on PGlite.
      const db: DbKind = dbs.includes('postgres') ? 'postgres' : 'pglite';
      await record('crawl', db, async () => {
        crawl = await runCrawl({ pages: args.quick ? 300 : 500, databaseUrl: db === 'postgres' ? postgresUrl : undefined, log });
      });
    }
    if (runs('abuse')) {
      for (const db of dbs) await record('abuse', db, async () => void abuse.push(await runAbuse(db, postgresUrl, timing)));
    }
    if (runs('replies')) {
      // PostgreSQL only (the issue's target is set there).
      if (dbs.includes('postgres') && postgresUrl) await record('replies', 'postgres', async () => void (replies = await runReplies(postgresUrl, timing)));
      else log('replies: needs PostgreSQL; skipped');
    }
    if (runs('events')) {
      // PostgreSQL only (the issue's targets are set there).
      if (dbs.includes('postgres') && postgresUrl) await record('events', 'postgres', async () => void (events = await runEvents(postgresUrl)));
      else log('events: needs PostgreSQL; skipped');
    }
    if (runs('recover')) {
      if (dbs.includes('postgres') && postgresUrl) await record('recover', 'postgres', async () => void (recover = await runRecover(postgresUrl)));
      else log('recover: needs PostgreSQL; skipped');
    }
    if (runs('devstart')) {
      // The embedded database only: `m2m dev` never uses PostgreSQL.
      await record('devstart', 'pglite', async () => void (devStart = await runDevStart()));
    }
    if (runs('ops')) {
      await record('ops', dbs.includes('postgres') ? 'postgres' : 'pglite', async () => void (ops = await runOps(dbs, postgresUrl, timing)));
    }
    if (runs('nodes')) {
      // Several processes on one database: PostgreSQL only.
      if (dbs.includes('postgres') && postgresUrl) await record('nodes', 'postgres', async () => void (nodes = await runNodes(postgresUrl, args.quick)));
      else log('nodes: needs PostgreSQL; skipped');
    }
    if (runs('search')) {
      // Quality on each database; the load part runs on PostgreSQL only (the issue's targets are set there).
      for (const db of dbs) await record('search', db, async () => void search.push(await runSearch(db, postgresUrl, args.quick)));
    }
    if (runs('inbound')) {
      for (const db of dbs) await record('inbound', db, async () => void inbound.push(await runInbound(db, postgresUrl, timing, args.quick)));
    }
    if (runs('webchat')) {
      for (const db of dbs) await record('webchat', db, async () => void webchat.push(await runWebchat(db, postgresUrl, webchatPlan(db, args.quick))));
    }
  } finally {
    await stopAllChildren();
    const dropped = await dropSchemas();
    if (dropped.length > 0) log(`dropped PostgreSQL schemas ${dropped.join(', ')}`);
  }

  printApi(api);
  printWebhooks(webhooks);
  printConversations(conversations, dbLabel);
  if (knowledge.length > 0) printKnowledge(knowledge);
  if (crawl) printCrawl(crawl);
  printAbuse(abuse, dbLabel);
  printReplies(replies);
  printEvents(events);
  printRecover(recover);
  printDevStart(devStart);
  printOps(ops, dbLabel);
  printNodes(nodes);
  if (search.length > 0) printSearch(search);
  printInbound(inbound);
  printWebchat(webchat);
  const checks = targets(api, webhooks, args.quick, { conversations, knowledge, crawl });
  printTargets(checks);
  for (const e of errors) console.log(`\nFAILED ${e.scenario} on ${dbLabel(e.db)}: ${e.message.split('\n')[0]} (details above and in .bench/logs/)`);

  const finishedAt = new Date();
  mkdirSync(OUT_DIR, { recursive: true });
  const file = path.join(OUT_DIR, 'results.json');
  const meta = {
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    seconds: round((finishedAt.getTime() - startedAt.getTime()) / 1000, 1),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    machineBusyBeforePct,
    loadAverageBefore,
    quick: args.quick,
    only: args.only ?? null,
    scenarios,
    databases: dbs,
    postgresUrl: postgresUrl ? redact(postgresUrl) : null,
    timing,
  };
  writeFileSync(file, `${JSON.stringify({ meta, api, webhooks, conversations, knowledge, crawl: crawl ?? null, abuse, replies: replies ?? null, events: events ?? null, recover: recover ?? null, devStart: devStart ?? null, ops: ops ?? null, nodes: nodes ?? null, search, inbound, targets: checks, errors }, null, 2)}\n`);
  console.log(`\nresults written to ${path.relative(process.cwd(), file)} (child logs in .bench/logs/); total ${meta.seconds} s`);
  return errors.length > 0 || (nodes !== undefined && !nodes.ok) ? 1 : 0;
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    console.error(`\n${signal}: stopping children and dropping schemas…`);
    killAllChildren();
    killCrawlChildren();
    void dropSchemas().finally(() => process.exit(130));
  });
}

main()
  .then((code) => process.exit(code))
  .catch(async (error: unknown) => {
    console.error('bench failed:', error instanceof Error ? error.message : error);
    killAllChildren();
    killCrawlChildren();
    await dropSchemas();
    process.exit(1);
  });
