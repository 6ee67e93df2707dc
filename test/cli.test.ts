import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { verifyWebhook } from '../packages/client/src/verify.js';
import { COMMANDS } from '../packages/client/src/cli/commands.js';
import { ALL_SCOPES } from '../src/auth/scopes.js';
import { EVENT_TYPES } from '../src/events/types.js';
import { USER_AGENT } from '../src/webhooks/deliver.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';

/**
 * The `m2m` command as a user runs it: the client package is built to JavaScript first, and every command runs
 * as a separate `node` process (no TypeScript loader) against a real server on 127.0.0.1.
 */
const ROOT = new URL('..', import.meta.url).pathname;
const CLI = join(ROOT, 'packages/client/dist/cli/main.js');
const run = promisify(execFile);

let app: TestApp;
let baseUrl: string;
let tenantId: string;
let apiKey: string;
let stateDir: string;

before(async () => {
  await run('npm', ['run', 'build', '--silent', '--prefix', 'packages/client'], { cwd: ROOT });
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '50,50,50,50,50,50' } });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.runtime.app.server.address();
  assert.ok(address && typeof address === 'object');
  baseUrl = `http://127.0.0.1:${address.port}/m2m/v1`;
  ({ tenantId, key: apiKey } = await app.tenantWithKey([...ALL_SCOPES]));
  stateDir = await mkdtemp(join(tmpdir(), 'm2m-cli-'));
});

after(async () => {
  await app?.close();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
});

function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, M2M_STATE_DIR: stateDir, M2M_BASE_URL: baseUrl, M2M_API_KEY: apiKey, M2M_ADMIN_TOKEN: ADMIN_TOKEN, ...extra };
  return env;
}

async function m2m(args: string[], env = cliEnv()): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env, cwd: ROOT });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? 1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

async function m2mJson<T = Record<string, unknown>>(args: string[], env?: NodeJS.ProcessEnv): Promise<T> {
  const result = await m2m([...args, '--json'], env);
  assert.equal(result.code, 0, `m2m ${args.join(' ')} → ${result.code}\n${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** A running `m2m listen`: its output so far, and a way to stop it like Ctrl-C. */
function startListen(args: string[]) {
  const child: ChildProcess = spawn(process.execPath, [CLI, 'listen', ...args], { env: cliEnv(), cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = { stdout: '', stderr: '' };
  child.stdout?.on('data', (chunk: Buffer) => (output.stdout += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output.stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    output,
    lines: () => output.stdout.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as { eventId: string; type: string; status: number | null }),
    secret: () => until('the printed secret', () => /Your webhook signing secret is (whsec_[A-Za-z0-9_-]+)/.exec(output.stderr)?.[1]),
    async stop() {
      child.kill('SIGINT');
      return exited;
    },
  };
}

test('every command answers --help with its usage, and the overview lists them all', async () => {
  const overview = await m2m(['--help']);
  assert.equal(overview.code, 0);
  for (const command of COMMANDS) {
    const words = command.words.join(' ');
    assert.ok(overview.stdout.includes(`m2m ${words}`), `overview lists ${words}`);
    const help = await m2m([...command.words, '--help']);
    assert.equal(help.code, 0, words);
    assert.ok(help.stdout.startsWith(`Usage: m2m ${words}`), help.stdout);
    assert.ok(help.stdout.includes('--json'), `${words} --help names --json`);
  }
  const unknown = await m2m(['frobnicate']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command/);
  const missing = await m2m(['events', 'get']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /missing <eventId>/);
});

test('the built package is plain JavaScript: imported by name from a .mjs file, its bin is what npx runs', async () => {
  const { stdout } = await run(process.execPath, [join(ROOT, 'packages/client/test/fixtures/plain-import.mjs'), baseUrl], { cwd: ROOT });
  const result = JSON.parse(stdout) as { verified: string; hasIterator: boolean; page: { error?: string } };
  assert.equal(result.verified, 'evt_1');
  assert.equal(result.hasIterator, true);
  assert.equal(result.page.error, 'M2M_AUTH_INVALID_CREDENTIALS', 'the built client made a real call and parsed the error envelope');

  const viaNpx = await run('npx', ['--no-install', 'm2m', '--help'], { cwd: ROOT });
  assert.match(viaNpx.stdout, /m2m listen/);
});

test('listen forwards new events as signed deliveries with the same body and headers, and resumes after a restart without re-sending', async () => {
  const local = await startReceiver((_req, res) => res.writeHead(204).end());
  const production = await startReceiver((_req, res) => res.writeHead(200).end());
  try {
    // A real subscription next to the listener: what the CLI sends is compared with what the server sends.
    const created = await app.api(apiKey, 'POST', '/webhooks', { url: production.url, events: ['message.created'] });
    assert.equal(created.statusCode, 201, created.body);
    const subscriptionSecret = (created.json() as { secret: string }).secret;

    const first = startListen(['--forward-to', local.url, '--interval', '100', '--json']);
    const secret = await first.secret();
    assert.match(secret, /^whsec_/);

    const inbound = await m2mJson<{ type: string; messageId: string }>(['trigger', 'message.created', '--tenant', tenantId]);
    const forwarded = await until('the forwarded message.created', () => local.received[0]);
    const event = verifyWebhook<{ messageId: string; direction: string }>(forwarded.body, forwarded.headers['x-service-signature'] as string, secret);
    assert.equal(event.type, 'message.created');
    assert.equal(event.data.messageId, inbound.messageId);
    assert.equal(event.data.direction, 'inbound');
    assert.equal(forwarded.headers['x-service-event-id'], event.eventId);
    assert.equal(forwarded.headers['user-agent'], USER_AGENT);
    assert.equal(forwarded.headers['content-type'], 'application/json');

    const delivered = await until('the real delivery', () => production.received.find((entry) => entry.headers['x-service-event-id'] === event.eventId));
    verifyWebhook(delivered.body, delivered.headers['x-service-signature'] as string, subscriptionSecret);
    assert.equal(forwarded.body, delivered.body, 'byte for byte the body a delivery carries');
    const names = (headers: Record<string, unknown>) => Object.keys(headers).filter((name) => name !== 'connection').sort();
    assert.deepEqual(names(forwarded.headers), names(delivered.headers));

    await until('the JSON line of the forward', () => first.lines().length === 1);
    assert.deepEqual(first.lines()[0], { eventId: event.eventId, type: 'message.created', status: 204 });
    assert.equal(await first.stop(), 0);

    // While the listener is down an opportunity is created; the restart forwards it, and only it.
    const opportunity = await m2mJson<{ opportunityId: string }>(['trigger', 'crm.opportunity.created', '--tenant', tenantId]);
    const second = startListen(['--forward-to', local.url, '--interval', '100', '--json']);
    assert.equal(await second.secret(), secret, 'the secret is kept across restarts');
    await until('the event created while the listener was down', () => local.received.length >= 2);
    const missed = verifyWebhook<{ opportunityId: string }>(local.received[1].body, local.received[1].headers['x-service-signature'] as string, secret);
    assert.equal(missed.type, 'crm.opportunity.created');
    assert.equal(missed.data.opportunityId, opportunity.opportunityId);

    // A later event marks the end: everything before it has been through the listener.
    await m2mJson(['trigger', 'knowledge.crawl.failed', '--tenant', tenantId]);
    await until('the last event', () => local.received.some((entry) => entry.body.includes('knowledge.crawl.failed')));
    assert.equal(await second.stop(), 0);
    const ids = local.eventIds();
    assert.equal(new Set(ids).size, ids.length, `no event forwarded twice: ${ids.join(', ')}`);
    assert.equal(ids.length, 3);
    assert.deepEqual(
      second.lines().map((line) => line.type),
      ['crm.opportunity.created', 'knowledge.crawl.failed'],
    );

    // --events narrows the feed; a type the key cannot name is the API's 403, shown as an error.
    const narrowed = startListen(['--forward-to', local.url, '--interval', '100', '--json', '--events', 'crm.opportunity.updated']);
    await narrowed.secret();
    await m2mJson(['trigger', 'crm.opportunity.updated', '--tenant', tenantId]);
    await until('the narrowed forward', () => narrowed.lines().length === 1);
    assert.equal(narrowed.lines()[0].type, 'crm.opportunity.updated', 'crm.opportunity.created of the same trigger is not forwarded');
    assert.equal(await narrowed.stop(), 0);
  } finally {
    await local.close();
    await production.close();
  }
});

test('listen reports a receiver that does not answer and goes on with the next event', async () => {
  const closedPort = await freePort();
  const listener = startListen(['--forward-to', `http://127.0.0.1:${closedPort}/webhooks`, '--interval', '100', '--json', '--events', 'knowledge.crawl.completed']);
  try {
    await listener.secret();
    await m2mJson(['trigger', 'knowledge.crawl.completed', '--tenant', tenantId]);
    await m2mJson(['trigger', 'knowledge.crawl.completed', '--tenant', tenantId]);
    await until('both events reported', () => listener.lines().length === 2);
    for (const line of listener.lines()) {
      assert.equal(line.status, null);
      assert.match(String((line as { error?: string }).error), /ECONNREFUSED/);
    }
  } finally {
    assert.equal(await listener.stop(), 0);
  }
});

test('trigger produces an event of every type, seen in the feed through `m2m events`', async () => {
  for (const type of EVENT_TYPES) {
    const triggered = await m2mJson<{ type: string }>(['trigger', type, '--tenant', tenantId]);
    assert.equal(triggered.type, type);
    const found = await until(`a ${type} event in the feed`, async () => {
      const page = await m2mJson<{ events: Array<{ eventId: string; type: string }> }>(['events', 'list', '--types', type, '--limit', '200']);
      return page.events.at(-1);
    });
    const shown = await m2mJson<{ eventId: string; type: string; tenantId: string }>(['events', 'get', found.eventId]);
    assert.deepEqual([shown.type, shown.tenantId], [type, tenantId]);
  }
  const unknown = await m2m(['trigger', 'message.exploded', '--tenant', tenantId]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown event type/);
});

test('admin and webhooks commands print JSON a script can read', async () => {
  const tenant = await m2mJson<{ tenantId: string; name: string }>(['admin', 'tenants', 'create', '--name', 'CLI Hotel', '--timezone', 'Europe/Madrid']);
  assert.equal(tenant.name, 'CLI Hotel');
  const key = await m2mJson<{ key: string; scopes: string[] }>(['admin', 'keys', 'create', '--tenant', tenant.tenantId, '--scopes', 'webhooks:read,webhooks:write']);
  assert.deepEqual(key.scopes, ['webhooks:read', 'webhooks:write']);
  const asNewKey = cliEnv({ M2M_API_KEY: key.key });
  assert.deepEqual(await m2mJson(['webhooks', 'list'], asNewKey), { subscriptions: [] });

  const receiver = await startReceiver((_req, res) => res.writeHead(500).end());
  try {
    const created = await app.api(key.key, 'POST', '/webhooks', { url: receiver.url, events: ['webhook.subscription.disabled'] });
    const { subscriptionId } = created.json() as { subscriptionId: string };
    await app.admin('POST', `/tenants/${tenant.tenantId}/webhook-events`, { type: 'webhook.subscription.disabled', data: { subscriptionId: 'sub_x', reason: 'failing' } });
    const failed = await until('a failed delivery', async () => {
      const page = await m2mJson<{ deliveries: Array<{ deliveryId: string }> }>(['webhooks', 'deliveries', subscriptionId, '--status', 'failed'], asNewKey);
      return page.deliveries[0];
    });
    const listed = await m2mJson<{ subscriptions: Array<{ subscriptionId: string }> }>(['webhooks', 'list'], asNewKey);
    assert.deepEqual(listed.subscriptions.map((subscription) => subscription.subscriptionId), [subscriptionId]);
    const retried = await m2mJson<{ delivery: { deliveryId: string; status: string } }>(['webhooks', 'retry', subscriptionId, failed.deliveryId], asNewKey);
    assert.equal(retried.delivery.deliveryId, failed.deliveryId);
    const recovered = await m2mJson<{ recovered: number }>(['webhooks', 'recover', subscriptionId, '--since', new Date(Date.now() - 3_600_000).toISOString()], asNewKey);
    assert.equal(typeof recovered.recovered, 'number');
  } finally {
    await receiver.close();
  }

  const denied = await m2m(['admin', 'tenants', 'create', '--name', 'X'], cliEnv({ M2M_ADMIN_TOKEN: 'wrong' }));
  assert.equal(denied.code, 1);
  assert.match(denied.stderr, /^error: 401/);
  const badStatus = await m2m(['webhooks', 'deliveries', 'sub_1', '--status', 'lost']);
  assert.equal(badStatus.code, 2);
});

test('the README tour: m2m listen forwards to the auto-reply example, which answers the guest once', async () => {
  const port = await freePort();
  const listener = startListen(['--forward-to', `http://127.0.0.1:${port}/webhooks`, '--interval', '100', '--json', '--events', 'message.created']);
  const secret = await listener.secret();
  const example = spawn(process.execPath, ['--import', 'tsx', 'packages/client/examples/auto-reply.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, M2M_API_KEY: apiKey, M2M_BASE_URL: baseUrl, WEBHOOK_SECRET: secret, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let exampleOutput = '';
  example.stdout.on('data', (chunk: Buffer) => (exampleOutput += chunk.toString('utf8')));
  const exampleExited = new Promise((resolve) => example.once('exit', resolve));
  try {
    await until('the example to listen', () => exampleOutput.includes('auto-reply listening'));
    const inbound = await m2mJson<{ conversationId: string; messageId: string }>(['trigger', 'message.created', '--tenant', tenantId]);
    const outbound = await until('the reply', async () => {
      const messages = await app.api(apiKey, 'GET', `/conversations/${inbound.conversationId}/messages?direction=outbound`);
      return (messages.json() as { messages: Array<{ text: string }> }).messages[0];
    });
    assert.ok(outbound.text.length > 0);
    // the reply's own message.created reaches the example too, which answers 200 and does not reply to itself
    await until('both events forwarded', () => listener.lines().length >= 2);
    assert.deepEqual(listener.lines().slice(0, 2).map((line) => line.status), [200, 200]);
    const messages = await app.api(apiKey, 'GET', `/conversations/${inbound.conversationId}/messages?direction=outbound`);
    assert.equal((messages.json() as { messages: unknown[] }).messages.length, 1);
  } finally {
    await listener.stop();
    example.kill('SIGTERM');
    await exampleExited;
  }
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(address && typeof address === 'object');
  return address.port;
}

test('m2m dev starts the server with a demo tenant, prints a working key and the next commands, which work as printed', async () => {
  const port = await freePort();
  const devState = await mkdtemp(join(tmpdir(), 'm2m-dev-'));
  const devUrl = `http://127.0.0.1:${port}/m2m/v1`;
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, M2M_STATE_DIR: devState, M2M_BASE_URL: devUrl };
  const dev = spawn(process.execPath, [CLI, 'dev', '--port', String(port), '--data-dir', 'memory://', '--json'], { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  dev.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  dev.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => dev.once('exit', (code) => resolve(code)));
  try {
    const line = await until('the dev summary', () => (stdout.includes('\n') ? stdout.split('\n')[0] : undefined), 90_000).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${stderr}`);
    });
    const summary = JSON.parse(line) as { baseUrl: string; apiKey: string; tenantId: string; next: string[] };
    assert.equal(summary.baseUrl, devUrl);
    assert.equal(summary.next.length, 3);

    // 1. the printed curl, run as printed
    const curl = await run('sh', ['-c', summary.next[0]], { env });
    const conversations = JSON.parse(curl.stdout) as { conversations: unknown[] };
    assert.equal(conversations.conversations.length, 3);
    const m2mDev = (args: string[]) => run(process.execPath, [CLI, ...args, '--json'], { env, cwd: ROOT });
    // every curl of the README, pointed at this server
    const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
    const curls = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)]
      .flatMap((block) => block[1].replace(/\\\n\s*/g, ' ').split('\n'))
      .filter((line) => line.startsWith('curl '))
      .map((line) => line.replace(/\s+# .*$/, '').replace(/(localhost|127\.0\.0\.1):8080/g, `127.0.0.1:${port}`).replace('m2m_live_…', summary.apiKey));
    assert.ok(curls.length >= 4, curls.join('\n'));
    for (const command of curls) {
      const { stdout } = await run('sh', ['-c', `${command} -w ' %{http_code}'`], { env: { ...env, M2M_API_KEY: summary.apiKey } });
      const status = Number(stdout.slice(stdout.lastIndexOf(' ') + 1));
      assert.ok(status >= 200 && status < 300, `${command} → ${stdout}`);
    }
    // the demo tenant has reservations and knowledge, readable with the printed key (every scope)
    const authed = { authorization: `Bearer ${summary.apiKey}` };
    const reservations = (await (await fetch(`${devUrl}/reservations`, { headers: authed })).json()) as { mirrors: unknown[] };
    assert.equal(reservations.mirrors.length, 2);
    const knowledge = (await (await fetch(`${devUrl}/knowledge/items`, { headers: authed })).json()) as { items: unknown[] };
    assert.ok(knowledge.items.length >= 2);

    // 2. and 3.: listen and trigger find the key and admin token that dev saved, with nothing exported
    assert.match(summary.next[1], /^npx m2m listen --forward-to /);
    assert.equal(summary.next[2], 'npx m2m trigger message.created');
    const triggered = JSON.parse((await m2mDev(['trigger', 'message.created'])).stdout) as { conversationId: string };
    const events = JSON.parse((await m2mDev(['events', 'list', '--types', 'message.created'])).stdout) as { events: Array<{ data: { conversationId: string } }> };
    assert.equal(events.events.at(-1)?.data.conversationId, triggered.conversationId);
  } finally {
    dev.kill('SIGINT');
    assert.equal(await exited, 0);
    await rm(devState, { recursive: true, force: true });
  }
});
