import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { enqueue } from '../../src/jobs/queue.js';
import { ADMIN_TOKEN, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { sharedDatabase } from '../helpers/shared-db.js';

// The WhatsApp Cloud API provider against a fake Graph API on 127.0.0.1: the request it makes, signed
// status callbacks, retries on 5xx and timeouts, and the guarantee that a message is never sent twice.

const TOKEN = 'test-graph-access-token';
const APP_SECRET = 'test-app-secret';
const VERIFY_TOKEN = 'test-verify-token';
const TEMPLATE = 'conversation_start';
const SCOPES = ['conversations:write', 'conversations:read', 'messages:read'];
const TIMEOUT = 30_000;

let seq = 0;
const nextPhone = (): string => `+5255${30_000_000 + ++seq}`;
const nextRef = (): string => `1065${String(++seq).padStart(8, '0')}`;

// ---------------------------------------------------------------------------------------------
// Fake Graph API

interface GraphCall {
  method: string;
  url: string;
  /** The phone-number id in /v21.0/{ref}/messages. */
  ref: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: Record<string, unknown>;
  /** The wamid answered, when the fake accepted the message. */
  wamid?: string;
}

type Answer = (call: GraphCall, res: http.ServerResponse) => void;

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

const accept: Answer = (call, res) => {
  call.wamid = `wamid.${randomBytes(12).toString('hex')}`;
  sendJson(res, 200, { messaging_product: 'whatsapp', contacts: [{ input: call.json.to, wa_id: call.json.to }], messages: [{ id: call.wamid }] });
};

const reject =
  (status: number): Answer =>
  (_call, res) =>
    sendJson(res, status, { error: { message: status >= 500 ? 'Service temporarily unavailable' : '(#132001) Template name does not exist in the translation', type: 'OAuthException', code: 132001 } });

/** Answers after `ms` (if the caller is still there). */
const slow =
  (ms: number): Answer =>
  (call, res) => {
    const timer = setTimeout(() => {
      if (!res.destroyed) accept(call, res);
    }, ms);
    res.on('close', () => clearTimeout(timer));
  };

/** Never answers. */
const hang: Answer = () => undefined;

/** The n-th call gets the n-th answer; the last answer repeats. */
function sequence(...answers: Answer[]): Answer {
  let index = 0;
  return (call, res) => answers[Math.min(index++, answers.length - 1)](call, res);
}

async function startFakeGraph(fallback: Answer = accept) {
  const calls: GraphCall[] = [];
  const answers = new Map<string, Answer>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(body) as Record<string, unknown>;
      } catch {
        // recorded as text only
      }
      const ref = /^\/v21\.0\/([^/]+)\/messages$/.exec(req.url ?? '')?.[1] ?? '';
      const call: GraphCall = { method: req.method ?? '', url: req.url ?? '', ref, headers: req.headers, body, json };
      calls.push(call);
      (answers.get(ref) ?? fallback)(call, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    calls,
    callsFor: (ref: string) => calls.filter((call) => call.ref === ref),
    answer(ref: string, answer: Answer) {
      answers.set(ref, answer);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

type FakeGraph = Awaited<ReturnType<typeof startFakeGraph>>;

function whatsappEnv(graph: FakeGraph): Record<string, string> {
  return {
    META_GRAPH_BASE_URL: graph.baseUrl,
    META_GRAPH_API_VERSION: 'v21.0',
    META_SYSTEM_USER_TOKEN: TOKEN,
    META_APP_SECRET: APP_SECRET,
    META_VERIFY_TOKEN: VERIFY_TOKEN,
    SEND_TIMEOUT_MS: '500',
    SEND_MAX_ATTEMPTS: '3',
  };
}

// ---------------------------------------------------------------------------------------------
// The world, through any injectable app (the test app, or a runtime on a shared database)

interface Injector {
  inject: Runtime['app']['inject'];
}

interface World {
  tenantId: string;
  key: string;
  channelId: string;
  ref: string;
  phone: string;
}

async function adminCall<T>(app: Injector, method: string, url: string, body?: unknown): Promise<T> {
  const res = await app.inject({ method: method as 'POST', url: `/admin/v1${url}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}) });
  if (res.statusCode >= 300) throw new Error(`admin ${method} ${url} → ${res.statusCode} ${res.body}`);
  return res.json() as T;
}

async function setupWorld(app: Injector, options: { accessToken?: string } = {}): Promise<World> {
  const { tenantId } = await adminCall<{ tenantId: string }>(app, 'POST', '/tenants', { name: 'Hotel Cloud' });
  const { key } = await adminCall<{ key: string }>(app, 'POST', `/tenants/${tenantId}/api-keys`, { name: 'sender', scopes: SCOPES });
  const ref = nextRef();
  const { channelId } = await adminCall<{ channelId: string }>(app, 'POST', `/tenants/${tenantId}/channels`, {
    kind: 'whatsapp',
    name: 'WhatsApp line',
    provider: 'whatsapp_cloud',
    connection: { phoneNumberId: ref, wabaId: '900100200', ...(options.accessToken ? { accessToken: options.accessToken } : {}) },
  });
  await adminCall(app, 'PUT', `/tenants/${tenantId}/channels/${channelId}/templates/${TEMPLATE}`, {
    category: 'UTILITY',
    locales: [
      { locale: 'en_US', status: 'approved', ready: true },
      { locale: 'es_MX', status: 'approved', ready: true },
    ],
  });
  const phone = nextPhone();
  await adminCall(app, 'POST', `/tenants/${tenantId}/contacts`, { phone, consent: true });
  return { tenantId, key, channelId, ref, phone };
}

async function startSend(app: Injector, world: World, overrides: Record<string, unknown> = {}): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/m2m/v1/conversations/start',
    headers: { authorization: `Bearer ${world.key}`, 'idempotency-key': randomUUID() },
    payload: { channelId: world.channelId, recipientPhone: world.phone, locale: 'es_MX', messageText: 'Hola {{1}}, su reserva está confirmada.', ...overrides },
  });
  assert.equal(res.statusCode, 202, res.body);
  return (res.json() as { requestEventId: string }).requestEventId;
}

interface StatusRecord {
  status: string;
  error?: { code: string; message: string };
}

async function statusOf(app: Injector, world: World, requestEventId: string): Promise<StatusRecord> {
  const res = await app.inject({ method: 'GET', url: `/m2m/v1/message-requests/${requestEventId}/status`, headers: { authorization: `Bearer ${world.key}` } });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as StatusRecord;
}

function untilStatus(app: Injector, world: World, requestEventId: string, status: string): Promise<StatusRecord> {
  return eventually(
    async () => {
      const record = await statusOf(app, world, requestEventId);
      return record.status === status ? record : undefined;
    },
    TIMEOUT,
    `status ${status}`,
  );
}

interface RequestRow {
  status: string;
  provider: string;
  provider_message_id: string | null;
  dispatching_at: Date | null;
  dispatch_attempts: number;
  unknown_outcomes: number;
  error_code: string | null;
}

async function requestRow(runtime: Runtime, requestEventId: string): Promise<RequestRow> {
  const rows = await runtime.services.db.query<RequestRow>(
    'SELECT status, provider, provider_message_id, dispatching_at, dispatch_attempts, unknown_outcomes, error_code FROM message_requests WHERE id = $1',
    [requestEventId],
  );
  return rows[0];
}

async function sendJobs(runtime: Runtime, requestEventId: string): Promise<Array<{ state: string; attempts: number }>> {
  return runtime.services.db.query<{ state: string; attempts: number }>(
    `SELECT state, attempts FROM jobs WHERE task = 'messaging.send' AND payload->>'requestEventId' = $1 ORDER BY id`,
    [requestEventId],
  );
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Status callbacks

function statusesPayload(phoneNumberId: string, ...statuses: Array<Record<string, unknown>>) {
  return {
    object: 'whatsapp_business_account',
    entry: [{ id: '102290129340398', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550783881', phone_number_id: phoneNumberId }, statuses } }] }],
  };
}

function callbackStatus(wamid: string, status: string, extra: Record<string, unknown> = {}) {
  return { id: wamid, status, timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: '525530000001', ...extra };
}

function sign(raw: string, secret = APP_SECRET): string {
  return `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
}

/** The database whose stored callbacks postCallback waits for (callbacks are processed by the workers). */
let callbackDb: Runtime['services']['db'] | undefined;

async function postCallback(app: Injector, payload: unknown, signature: string | null = 'valid') {
  const raw = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (signature !== null) headers['x-hub-signature-256'] = signature === 'valid' ? sign(raw) : signature;
  const res = await app.inject({ method: 'POST', url: '/providers/whatsapp/webhook', headers, payload: raw });
  const db = callbackDb;
  if (res.statusCode === 200 && db) {
    await eventually(async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM provider_callbacks WHERE processed_at IS NULL'))[0].n === 0, TIMEOUT, 'callbacks processed');
  }
  return res;
}

// ---------------------------------------------------------------------------------------------

describe('WhatsApp Cloud provider', () => {
  let graph: FakeGraph;
  let app: TestApp;
  let http_: Injector;

  before(async () => {
    graph = await startFakeGraph();
    app = await startTestApp({ startWorkers: true, env: whatsappEnv(graph) });
    http_ = app.runtime.app;
    callbackDb = app.runtime.services.db;
  });
  after(async () => {
    await app.close();
    await graph.close();
  });

  /** A world whose sends are already accepted: returns the request, its wamid and the world. */
  async function sentMessage() {
    const world = await setupWorld(http_);
    const requestEventId = await startSend(http_, world);
    await untilStatus(http_, world, requestEventId, 'sent');
    const wamid = (await requestRow(app.runtime, requestEventId)).provider_message_id;
    assert.ok(wamid);
    return { world, requestEventId, wamid };
  }

  test('POST /v21.0/{phone-number id}/messages with the bearer token and the template; the answered wamid makes it sent', async () => {
    const world = await setupWorld(http_);
    const requestEventId = await startSend(http_, world, { locale: 'es_MX', messageText: 'Hola Ana, su reserva está confirmada.' });
    await untilStatus(http_, world, requestEventId, 'sent');

    const calls = graph.callsFor(world.ref);
    assert.equal(calls.length, 1);
    const [call] = calls;
    assert.equal(call.method, 'POST');
    assert.equal(call.url, `/v21.0/${world.ref}/messages`);
    assert.equal(call.headers.authorization, `Bearer ${TOKEN}`);
    assert.match(String(call.headers['content-type']), /^application\/json/);
    assert.deepEqual(call.json, {
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: world.phone.slice(1),
      type: 'template',
      template: {
        name: TEMPLATE,
        language: { code: 'es_MX' },
        components: [{ type: 'body', parameters: [{ type: 'text', text: 'Hola Ana, su reserva está confirmada.' }] }],
      },
    });

    const row = await requestRow(app.runtime, requestEventId);
    assert.equal(row.provider, 'whatsapp_cloud');
    assert.equal(row.provider_message_id, call.wamid);
    assert.equal(row.dispatching_at, null);
    assert.equal(row.dispatch_attempts, 1);
    assert.deepEqual(await sendJobs(app.runtime, requestEventId), [{ state: 'succeeded', attempts: 1 }]);
    const events = await app.runtime.services.db.query<{ body: string }>(`SELECT body FROM webhook_events WHERE tenant_id = $1 AND type = 'message.delivery.updated'`, [world.tenantId]);
    assert.equal(events.length, 1);
    const data = (JSON.parse(events[0].body) as { data: Record<string, unknown> }).data;
    assert.equal(data.status, 'sent');
    assert.equal(data.providerMessageId, call.wamid);
  });

  test('signed status callbacks: delivered, read; a late delivered changes nothing', async () => {
    const { world, requestEventId, wamid } = await sentMessage();

    const delivered = await postCallback(http_, statusesPayload(world.ref, callbackStatus(wamid, 'delivered')));
    assert.equal(delivered.statusCode, 200, delivered.body);
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'delivered');

    const read = await postCallback(http_, statusesPayload(world.ref, callbackStatus(wamid, 'read')));
    assert.equal(read.statusCode, 200, read.body);
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'read');

    const late = await postCallback(http_, statusesPayload(world.ref, callbackStatus(wamid, 'delivered'), callbackStatus(wamid, 'sent')));
    assert.equal(late.statusCode, 200, late.body);
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'read');
    const events = await app.runtime.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_events WHERE tenant_id = $1 AND type = 'message.delivery.updated'`, [world.tenantId]);
    assert.equal(events[0].n, 3, 'sent, delivered, read: the late callbacks emitted nothing');
  });

  test('out of order: read first, then delivered, stays read', async () => {
    const { world, requestEventId, wamid } = await sentMessage();
    assert.equal((await postCallback(http_, statusesPayload(world.ref, callbackStatus(wamid, 'read')))).statusCode, 200);
    assert.equal((await postCallback(http_, statusesPayload(world.ref, callbackStatus(wamid, 'delivered')))).statusCode, 200);
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'read');
  });

  test('a wrong, missing or differently keyed signature is 401 and changes nothing', async () => {
    const { world, requestEventId, wamid } = await sentMessage();
    const payload = statusesPayload(world.ref, callbackStatus(wamid, 'delivered'));
    const raw = JSON.stringify(payload);
    for (const signature of [sign(raw, 'another-secret'), null, 'sha256=', `sha256=${'0'.repeat(64)}`, sign(raw).replace('sha256=', 'sha1='), sign(`${raw} `)]) {
      const res = await postCallback(http_, payload, signature);
      assert.equal(res.statusCode, 401, `signature ${signature}: ${res.body}`);
      assert.equal(res.json().error.code, 'M2M_AUTH_INVALID_CREDENTIALS');
    }
    // The signature covers the raw bytes: the same JSON re-serialised differently is refused.
    const reformatted = JSON.stringify(payload, null, 2);
    assert.equal((await postCallback(http_, reformatted, sign(raw))).statusCode, 401);
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'sent');
    // And the correctly signed one goes through.
    assert.equal((await postCallback(http_, reformatted, sign(reformatted))).statusCode, 200);
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'delivered');
  });

  test('failed with errors[] on a delivered message: failed with the provider error code', async () => {
    const { world, requestEventId, wamid } = await sentMessage();
    await postCallback(http_, statusesPayload(world.ref, callbackStatus(wamid, 'delivered')));
    const res = await postCallback(
      http_,
      statusesPayload(world.ref, callbackStatus(wamid, 'failed', { errors: [{ code: 131026, title: 'Message undeliverable', message: 'Message undeliverable', error_data: { details: 'Receiver is incapable of receiving this message' } }] })),
    );
    assert.equal(res.statusCode, 200, res.body);
    const record = await statusOf(http_, world, requestEventId);
    assert.equal(record.status, 'failed');
    assert.ok(record.error);
    assert.match(record.error.code, /131026/);
    assert.equal(typeof record.error.message, 'string');
    // A failed send blocks the recipient until reconciled, whichever way it failed.
    const again = await http_.inject({
      method: 'POST',
      url: '/m2m/v1/conversations/start',
      headers: { authorization: `Bearer ${world.key}`, 'idempotency-key': randomUUID() },
      payload: { channelId: world.channelId, recipientPhone: world.phone, locale: 'en_US', messageText: 'Hello again' },
    });
    assert.equal(again.statusCode, 409, again.body);
    assert.equal(again.json().error.details.reason, 'unreconciled_failed_attempt');
  });

  test('unknown message ids and payloads without statuses are acknowledged and ignored; a signed non-JSON body is 400', async () => {
    const { world, requestEventId } = await sentMessage();
    const unknown = await postCallback(http_, statusesPayload(world.ref, callbackStatus('wamid.unknown', 'delivered')));
    assert.equal(unknown.statusCode, 200, unknown.body);
    const inbound = await postCallback(http_, {
      object: 'whatsapp_business_account',
      entry: [{ id: '1', changes: [{ field: 'messages', value: { messages: [{ from: '525530000001', id: 'wamid.in', type: 'text', text: { body: 'hi' } }] } }] }],
    });
    assert.equal(inbound.statusCode, 200, inbound.body);
    assert.equal((await postCallback(http_, 'not json at all')).statusCode, 400);
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'sent');
  });

  test('GET verification handshake echoes hub.challenge; a wrong token or mode is 401', async () => {
    const verify = (query: string) => http_.inject({ method: 'GET', url: `/providers/whatsapp/webhook?${query}` });
    const ok = await verify(`hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=123`);
    assert.equal(ok.statusCode, 200);
    assert.equal(ok.body, '123');
    assert.match(String(ok.headers['content-type']), /^text\/plain/);
    assert.equal((await verify('hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=123')).statusCode, 401);
    assert.equal((await verify(`hub.mode=unsubscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=123`)).statusCode, 401);
    assert.equal((await verify('hub.mode=subscribe&hub.challenge=123')).statusCode, 401);
  });

  test('5xx twice then 200: retried with backoff and sent; the fake saw three requests', async () => {
    const world = await setupWorld(http_);
    graph.answer(world.ref, sequence(reject(500), reject(503), accept));
    const requestEventId = await startSend(http_, world);
    await untilStatus(http_, world, requestEventId, 'sent');
    const calls = graph.callsFor(world.ref);
    assert.equal(calls.length, 3);
    assert.deepEqual(new Set(calls.map((c) => c.body)).size, 1, 'every attempt sends the same message');
    const row = await requestRow(app.runtime, requestEventId);
    assert.equal(row.provider_message_id, calls[2].wamid);
    assert.equal(row.dispatch_attempts, 3);
    assert.deepEqual(await sendJobs(app.runtime, requestEventId), [{ state: 'succeeded', attempts: 3 }]);
    assert.equal((await statusOf(http_, world, requestEventId)).error, undefined);
  });

  test('429 (rate limited) is retried like a 5xx', async () => {
    const world = await setupWorld(http_);
    graph.answer(world.ref, sequence(reject(429), accept));
    const requestEventId = await startSend(http_, world);
    await untilStatus(http_, world, requestEventId, 'sent');
    assert.equal(graph.callsFor(world.ref).length, 2);
  });

  test('5xx on every attempt: failed with the Graph error code (whatsapp_<code>) after SEND_MAX_ATTEMPTS (3) requests', async () => {
    const world = await setupWorld(http_);
    graph.answer(world.ref, reject(500));
    const requestEventId = await startSend(http_, world);
    const record = await untilStatus(http_, world, requestEventId, 'failed');
    assert.equal(record.error?.code, 'whatsapp_132001');
    assert.equal(typeof record.error?.message, 'string');
    await pause(300);
    assert.equal(graph.callsFor(world.ref).length, 3);
    assert.deepEqual(await sendJobs(app.runtime, requestEventId), [{ state: 'succeeded', attempts: 3 }]);
  });

  test('a 4xx is final: failed with whatsapp_<code> after one request', async () => {
    const world = await setupWorld(http_);
    graph.answer(world.ref, reject(400));
    const requestEventId = await startSend(http_, world);
    const record = await untilStatus(http_, world, requestEventId, 'failed');
    assert.equal(record.error?.code, 'whatsapp_132001');
    assert.match(record.error?.message ?? '', /Template name does not exist/);
    await pause(1_500); // longer than the first retry delay would be
    assert.equal(graph.callsFor(world.ref).length, 1);
    assert.deepEqual(await sendJobs(app.runtime, requestEventId), [{ state: 'succeeded', attempts: 1 }]);
  });

  test('a provider slower than SEND_TIMEOUT_MS: the message may be out, so it is failed as send_outcome_unknown, never sent again', async () => {
    const world = await setupWorld(http_);
    graph.answer(world.ref, slow(5_000));
    const requestEventId = await startSend(http_, world);
    const record = await untilStatus(http_, world, requestEventId, 'failed');
    assert.equal(record.error?.code, 'send_outcome_unknown');
    assert.match(record.error?.message ?? '', /provider_timeout/);
    await pause(1_500);
    assert.equal(graph.callsFor(world.ref).length, 1);
    const row = await requestRow(app.runtime, requestEventId);
    assert.equal(row.dispatch_attempts, 1);
    assert.equal(row.dispatching_at, null);
  });

  test('a 2xx without a usable message id is not retried (the message may have gone out)', async () => {
    const world = await setupWorld(http_);
    graph.answer(world.ref, (_call, res) => sendJson(res, 200, { messaging_product: 'whatsapp', messages: [] }));
    const requestEventId = await startSend(http_, world);
    const record = await untilStatus(http_, world, requestEventId, 'failed');
    assert.equal(record.error?.code, 'send_outcome_unknown');
    assert.match(record.error?.message ?? '', /provider_bad_response/);
    await pause(1_500);
    assert.equal(graph.callsFor(world.ref).length, 1);

    const other = await setupWorld(http_);
    graph.answer(other.ref, (_call, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>ok</html>'));
    const second = await startSend(http_, other);
    const secondRecord = await untilStatus(http_, other, second, 'failed');
    assert.equal(secondRecord.error?.code, 'send_outcome_unknown');
    await pause(1_500);
    assert.equal(graph.callsFor(other.ref).length, 1, 'a 2xx with a body that is not JSON is not sent again');
  });

  test("a channel with its own access token sends with it, not with META_SYSTEM_USER_TOKEN", async () => {
    const world = await setupWorld(http_, { accessToken: 'channel-own-token' });
    const requestEventId = await startSend(http_, world);
    await untilStatus(http_, world, requestEventId, 'sent');
    assert.deepEqual(graph.callsFor(world.ref).map((call) => call.headers.authorization), ['Bearer channel-own-token']);
  });

  test('never sent twice: re-running the send job after success calls the provider no more', async () => {
    const { world, requestEventId, wamid } = await sentMessage();
    const db = app.runtime.services.db;
    const now = new Date();
    const again = await db.transaction(async (tx) => [
      await enqueue(tx, now, { task: 'messaging.send', tenantId: world.tenantId, payload: { requestEventId }, dedupeKey: `${requestEventId}:again` }),
      await enqueue(tx, now, { task: 'messaging.send', tenantId: world.tenantId, payload: { requestEventId }, dedupeKey: requestEventId }),
      await enqueue(tx, now, { task: 'messaging.send', tenantId: world.tenantId, payload: { requestEventId } }),
    ]);
    assert.ok(again.every((id) => typeof id === 'number'), 'three new jobs');
    await eventually(async () => (await sendJobs(app.runtime, requestEventId)).filter((j) => j.state === 'succeeded').length === 4, TIMEOUT, 're-run jobs to finish');
    assert.equal(graph.callsFor(world.ref).length, 1);
    const row = await requestRow(app.runtime, requestEventId);
    assert.equal(row.status, 'sent');
    assert.equal(row.provider_message_id, wamid);
    assert.equal(row.dispatch_attempts, 1);

    // The same after later statuses, and after a failure.
    await postCallback(http_, statusesPayload(world.ref, callbackStatus(wamid, 'failed', { errors: [{ code: 131047, title: 'Re-engagement message' }] })));
    assert.equal((await statusOf(http_, world, requestEventId)).status, 'failed');
    await db.transaction((tx) => enqueue(tx, new Date(), { task: 'messaging.send', tenantId: world.tenantId, payload: { requestEventId } }));
    await eventually(async () => (await sendJobs(app.runtime, requestEventId)).every((j) => j.state === 'succeeded'), TIMEOUT, 'the last job');
    assert.equal(graph.callsFor(world.ref).length, 1);
  });
});

describe('WhatsApp sends across worker crashes', () => {
  test('a send found mid-call (its worker died during the provider call) fails with send_outcome_unknown, without calling the provider again', { timeout: 60_000 }, async () => {
    const graph = await startFakeGraph();
    const app = await startTestApp({ env: whatsappEnv(graph) });
    try {
      const db = app.runtime.services.db;
      const world = await setupWorld(app.runtime.app);
      const requestEventId = await startSend(app.runtime.app, world);
      // As a worker that died during the provider call leaves it: dispatching_at set, the job still pending.
      await db.query('UPDATE message_requests SET dispatching_at = $2, dispatch_attempts = 1 WHERE id = $1', [requestEventId, new Date()]);
      await app.runtime.startWorkers();

      const record = await untilStatus(app.runtime.app, world, requestEventId, 'failed');
      assert.equal(record.error?.code, 'send_outcome_unknown');
      assert.equal(graph.callsFor(world.ref).length, 0, 'the provider is not called again');
      const row = await requestRow(app.runtime, requestEventId);
      assert.equal(row.unknown_outcomes, 1);
      assert.equal(row.dispatch_attempts, 1);
      assert.equal(row.dispatching_at, null);
      assert.deepEqual(await sendJobs(app.runtime, requestEventId), [{ state: 'succeeded', attempts: 1 }]);
    } finally {
      await app.close();
      await graph.close();
    }
  });

  test('a worker killed (SIGKILL) during the provider call: the next worker fails the send as send_outcome_unknown and never calls the provider again', { timeout: 120_000 }, async () => {
    const database = await sharedDatabase();
    const hanging = await startFakeGraph(hang);
    const answering = await startFakeGraph();
    const open = async (graph: FakeGraph): Promise<Runtime> =>
      createRuntime(loadConfig({ ADMIN_TOKEN, RATE_LIMIT_RPS: '100000', RATE_LIMIT_BURST: '100000', JOB_POLL_INTERVAL_MS: '50', ...database.env, ...whatsappEnv(graph) }, []), {
        logger: pino({ level: 'silent' }),
      });
    let runtime: Runtime | undefined;
    try {
      // 1. The accepted send, with no worker running.
      runtime = await open(hanging);
      const world = await setupWorld(runtime.app);
      const requestEventId = await startSend(runtime.app, world);
      await runtime.close();
      runtime = undefined; // PGlite: one process at a time

      // 2. A worker claims it, calls a provider that never answers, and is killed mid-call.
      const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('../fixtures/send-crash-worker.ts', import.meta.url))], {
        env: { ...process.env, ...database.env, META_GRAPH_BASE_URL: hanging.baseUrl, META_SYSTEM_USER_TOKEN: TOKEN },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      let exited = false;
      child.once('exit', () => {
        exited = true;
      });
      try {
        await eventually(async () => hanging.callsFor(world.ref).length > 0 || exited, 60_000, 'the doomed worker to call the provider');
        assert.ok(!exited, 'the worker was still running');
      } finally {
        child.kill('SIGKILL');
        if (!exited) await new Promise((resolve) => child.once('exit', resolve));
      }
      assert.equal(hanging.callsFor(world.ref).length, 1);

      // 3. A new worker finds the call in flight: the message may have gone out, so it is not sent again.
      runtime = await open(answering);
      const left = await requestRow(runtime, requestEventId);
      assert.equal(left.status, 'queued');
      assert.ok(left.dispatching_at, 'the dead worker left evidence of the call in flight');
      assert.equal(left.dispatch_attempts, 1);
      await runtime.startWorkers();
      const record = await untilStatus(runtime.app, world, requestEventId, 'failed');
      assert.equal(record.error?.code, 'send_outcome_unknown');

      assert.equal(answering.callsFor(world.ref).length, 0, 'no second provider call');
      assert.equal(hanging.callsFor(world.ref).length, 1);
      const row = await requestRow(runtime, requestEventId);
      assert.equal(row.provider_message_id, null);
      assert.equal(row.dispatch_attempts, 1);
      assert.equal(row.unknown_outcomes, 1);
      assert.equal(row.dispatching_at, null);
      const jobs = await sendJobs(runtime, requestEventId);
      assert.equal(jobs.length, 1);
      assert.equal(jobs[0].state, 'succeeded');
    } finally {
      await runtime?.close(2_000);
      await hanging.close();
      await answering.close();
      await database.drop();
    }
  });
});
