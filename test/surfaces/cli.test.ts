import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { verifyWebhook } from '../../packages/client/src/verify.js';
import { COMMANDS } from '../../packages/client/src/cli/commands.js';
import { ALL_SCOPES } from '../../src/auth/scopes.js';
import { EVENT_TYPES } from '../../src/events/types.js';
import { USER_AGENT } from '../../src/webhooks/deliver.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';

/**
 * The `m2m` command as a user runs it: the client package is built to JavaScript first, and every command runs
 * as a separate `node` process (no TypeScript loader) against a real server on 127.0.0.1.
 */
const ROOT = new URL('../..', import.meta.url).pathname;
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

test('m2m --version and -v print the package version', async () => {
  const { version } = JSON.parse(await readFile(join(ROOT, 'packages/client/package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-v']) {
    const result = await m2m([flag]);
    assert.equal(result.code, 0);
    assert.equal(result.stdout, `${version}\n`);
  }
  assert.match((await m2m(['--help'])).stdout, /m2m --version/);
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

test('the plain-JavaScript tour (examples/tour.mjs) runs with node against the built package', async () => {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, M2M_API_KEY: apiKey, M2M_BASE_URL: baseUrl };
  const { stdout } = await run(process.execPath, [join(ROOT, 'packages/client/examples/tour.mjs')], { env, cwd: ROOT });
  assert.match(stdout, /^\d+ conversations$/m);
  const created = /^subscription (\S+) → https:\/\/hooks\.example\.com\/m2m, secret whsec_\S+$/m.exec(stdout);
  assert.ok(created, stdout);
  assert.match(stdout, new RegExp(`^  ${created[1]}  active, 0 failures in a row$`, 'm'));
  assert.match(stdout, /^\d+ message\.created events \(more: (true|false)\)$/m);
  assert.match(stdout, new RegExp(`^subscription ${created[1]} deleted$`, 'm'));
  assert.equal((await app.api(apiKey, 'GET', `/webhooks/${created[1]}`)).statusCode, 404, 'the tour leaves nothing behind');

  const refused = await run(process.execPath, [join(ROOT, 'packages/client/examples/tour.mjs')], { env: { ...env, M2M_API_KEY: 'm2m_live_wrong' }, cwd: ROOT }).then(
    () => undefined,
    (error: { code?: number; stderr?: string }) => error,
  );
  assert.equal(refused?.code, 1);
  assert.match(String(refused?.stderr), /^401 M2M_AUTH_INVALID_CREDENTIALS: .*\(request id \S+\)$/m);
});

test('npm start without ADMIN_TOKEN logs how to get a key', async () => {
  const port = await freePort();
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: 'memory://', PORT: String(port), LOG_LEVEL: 'info' };
  const server = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  server.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  server.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
  try {
    const line = await until('the hint', () => output.split('\n').find((entry) => entry.includes('no ADMIN_TOKEN')), 90_000);
    const { msg } = JSON.parse(line) as { msg: string };
    assert.match(msg, /npx m2m dev/);
    assert.match(msg, /ADMIN_TOKEN=<secret>/);
    assert.match(msg, /m2m admin tenants create/);
    assert.match(msg, /m2m admin keys create/);
    assert.ok(msg.includes(`http://127.0.0.1:${port}/m2m/v1/docs`), msg);
  } finally {
    server.kill('SIGTERM');
    await exited;
  }
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

test('listen tries an event nobody answered again until a receiver is up, in order, each once', async () => {
  const port = await freePort();
  const listener = startListen(['--forward-to', `http://127.0.0.1:${port}/webhooks`, '--interval', '100', '--json', '--events', 'knowledge.crawl.completed']);
  let local: Awaited<ReturnType<typeof receiverOn>> | undefined;
  try {
    await listener.secret();
    await m2mJson(['trigger', 'knowledge.crawl.completed', '--tenant', tenantId]);
    await m2mJson(['trigger', 'knowledge.crawl.completed', '--tenant', tenantId]);
    // Nothing listens yet: the first event is reported and tried again, the second waits behind it.
    await until('two failed attempts', () => listener.lines().length >= 2);
    const failures = listener.lines();
    assert.equal(new Set(failures.map((line) => line.eventId)).size, 1, 'the later event waits for the first');
    for (const line of failures) {
      assert.equal(line.status, null);
      assert.match(String((line as { error?: string }).error), /ECONNREFUSED/);
      assert.equal(typeof (line as { retryInMs?: number }).retryInMs, 'number');
    }

    local = await receiverOn(port);
    const receiver = local;
    await until('both events delivered and reported', () => receiver.eventIds.length >= 2 && listener.lines().filter((line) => line.status !== null).length >= 2);
    const answered = listener.lines().filter((line) => line.status !== null);
    assert.deepEqual(answered.map((line) => line.status), [204, 204]);
    assert.equal(answered[0].eventId, failures[0].eventId, 'the event triggered before the receiver was up comes first');
    assert.deepEqual(receiver.eventIds, answered.map((line) => line.eventId));
  } finally {
    assert.equal(await listener.stop(), 0);
    await local?.close();
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

    // The text forms say what is wrong: the subscription's health, each delivery's failure and next attempt.
    const listedText = await m2m(['webhooks', 'list'], asNewKey);
    assert.equal(listedText.code, 0, listedText.stderr);
    assert.match(listedText.stdout, /^SUBSCRIPTION ID +URL +STATE +HEALTH +EVENTS$/m);
    assert.match(listedText.stdout, new RegExp(`^${subscriptionId} +\\S+ +active +\\d+ failing \\(http_status at \\d{4}-\\S+, never succeeded\\)`, 'm'));
    const deliveriesText = await m2m(['webhooks', 'deliveries', subscriptionId], asNewKey);
    assert.equal(deliveriesText.code, 0, deliveriesText.stderr);
    assert.match(deliveriesText.stdout, /^DELIVERY ID +TYPE +EVENT ID +STATUS +ATTEMPTS +FAILURE +NEXT ATTEMPT$/m);
    assert.match(deliveriesText.stdout, new RegExp(`^${failed.deliveryId} .* http_status 500 +(-|\\d{4}-\\S+)$`, 'm'));
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

/** A receiver that answers 204 on a port chosen beforehand (the one a listener already forwards to). */
async function receiverOn(port: number) {
  const eventIds: string[] = [];
  const server = createHttpServer((req, res) => {
    req.resume();
    req.once('end', () => {
      eventIds.push(String(req.headers['x-service-event-id']));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    eventIds,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(address && typeof address === 'object');
  return address.port;
}

/** A pasted command running in its own terminal: a shell in its own process group, stopped like Ctrl-C. */
function terminal(command: string, env: NodeJS.ProcessEnv) {
  const child = spawn('sh', ['-c', command], { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    output,
    async stop() {
      if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, 'SIGINT');
      await exited;
    },
  };
}

test('m2m dev starts the server with a demo tenant, prints a working key and the next commands, which work as printed and lose no event', async () => {
  const port = await freePort();
  const receiverPort = await freePort();
  const devState = await mkdtemp(join(tmpdir(), 'm2m-dev-'));
  const devUrl = `http://127.0.0.1:${port}/m2m/v1`;
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, M2M_STATE_DIR: devState, M2M_BASE_URL: devUrl };
  const args = ['dev', '--port', String(port), '--data-dir', 'memory://', '--receiver-port', String(receiverPort)];
  const dev = spawn(process.execPath, [CLI, ...args], { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  dev.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  dev.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => dev.once('exit', (code) => resolve(code)));
  const terminals: Array<ReturnType<typeof terminal>> = [];
  try {
    await until('the dev summary', () => stdout.includes('Ctrl-C stops the server.'), 90_000).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${stdout}\n${stderr}`);
    });
    // What a person copies: the export lines, and the command under each numbered step.
    const exported = [...stdout.matchAll(/^ {2}export (M2M_[A-Z_]+)=(\S+)$/gm)].map((match) => [match[1], match[2]]);
    assert.deepEqual(exported.map(([name]) => name), ['M2M_API_KEY', 'M2M_BASE_URL']);
    const apiKey = exported[0][1];
    assert.match(apiKey, /^m2m_/);
    assert.equal(exported[1][1], devUrl);
    const next = [...stdout.matchAll(/^ {2}\d\. .*\n {5}(.*)$/gm)].map((match) => match[1]);
    assert.equal(next.length, 4, stdout);
    const summary = { apiKey, next };

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

    // 2., 3. and 4., each in its own terminal as a person would paste them, one right after the other: the
    // receiver, the listener in front of it, a guest writing in. listen and trigger find the key and admin token
    // that dev saved, with nothing exported; the event reaches the receiver even if it was not listening yet.
    assert.match(summary.next[1], new RegExp(`^WEBHOOK_SECRET=whsec_\\S+ PORT=${receiverPort} node --import tsx packages/client/examples/receiver\\.ts$`));
    assert.equal(summary.next[2], `npx m2m listen --forward-to http://127.0.0.1:${receiverPort}/webhooks`);
    assert.equal(summary.next[3], 'npx m2m trigger message.created');
    const receiver = terminal(summary.next[1], env);
    terminals.push(receiver);
    const listener = terminal(summary.next[2], env);
    terminals.push(listener);
    await until('the listener to be ready', () => listener.output.stderr.includes('Ready!'), 30_000);
    await run('sh', ['-c', summary.next[3]], { env, cwd: ROOT });
    const accepted = await until('the event at the receiver', () => /accepted message\.created (evt_\S+)/.exec(receiver.output.stdout)?.[1], 30_000).catch((error: unknown) => {
      throw new Error(`${String(error)}\nreceiver: ${JSON.stringify(receiver.output)}\nlisten: ${JSON.stringify(listener.output)}`);
    });
    const events = JSON.parse((await m2mDev(['events', 'list', '--types', 'message.created'])).stdout) as { events: Array<{ eventId: string }> };
    assert.equal(events.events.at(-1)?.eventId, accepted);

    // The demo channel is a WhatsApp Cloud API channel on a simulated number: the guest's message came as a signed
    // Meta callback, and a reply goes out through the Graph API stand-in, which reports it delivered, then read.
    const delivery = JSON.parse((await m2mDev(['trigger', 'message.delivery.updated'])).stdout) as { requestEventId: string; conversationId: string };
    const inbound = JSON.parse((await m2mDev(['trigger', 'message.created'])).stdout) as { via?: string };
    assert.equal(inbound.via, 'a signed WhatsApp Cloud API callback');
    await until('the reply at the simulated number', () => stderr.includes('(simulated WhatsApp) the business sent +'), 30_000);
    const statuses = async () =>
      (JSON.parse((await m2mDev(['events', 'list', '--types', 'message.delivery.updated', '--limit', '100'])).stdout) as { events: Array<{ data: { requestEventId: string; status: string } }> }).events
        .filter((event) => event.data.requestEventId === delivery.requestEventId)
        .map((event) => event.data.status);
    assert.deepEqual(await until('sent, delivered and read', async () => ((await statuses()).includes('read') ? statuses() : undefined), 30_000), ['sent', 'delivered', 'read']);
  } finally {
    for (const running of terminals) await running.stop();
    dev.kill('SIGINT');
    assert.equal(await exited, 0);
    await rm(devState, { recursive: true, force: true });
  }
});
