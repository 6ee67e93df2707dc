import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { JsonParserThread } from '../../src/http/json-body.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { expectError, issuesOf } from '../fixtures/webhooks.js';

// Hostile input at the edge: text the database cannot store, dates out of range, unknown query parameters,
// deep or wide bodies, and the refusals Fastify's router and Node's HTTP parser make before a route runs.
// Every answer is the error envelope with X-Request-Id and nothing is a 5xx.

let app: TestApp;
let world: { tenantId: string; key: string; leadId: string; conversationId: string };

before(async () => {
  app = await startTestApp({ env: { MCP_ENABLED: 'true' } });
  const tenant = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'Hotel Sol' });
  const { key } = await app.admin<{ key: string }>('POST', `/tenants/${tenant.tenantId}/api-keys`, {
    name: 'all',
    scopes: ['crm:followups:write', 'webhooks:write', 'conversations:write', 'messages:read', 'reservations:read'],
  });
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'whatsapp', name: 'Line' });
  const inbound = await app.admin<{ conversationId: string }>('POST', `/tenants/${tenant.tenantId}/inbound-messages`, {
    channelId,
    contact: { name: 'Ana', phone: '+34600111222' },
    text: 'Hola',
  });
  const lead = await app.admin<{ leadId: string }>('POST', `/tenants/${tenant.tenantId}/leads`, { name: 'Ana', conversationId: inbound.conversationId });
  world = { tenantId: tenant.tenantId, key, leadId: lead.leadId, conversationId: inbound.conversationId };
});
after(() => app.close());

/** A 4xx envelope with X-Request-Id (and the id in 5xx details would be the only other case). */
function assertRefusal(res: LightMyRequestResponse, status: number, code: string) {
  assert.match(String(res.headers['x-request-id']), /^[A-Za-z0-9._:-]{1,128}$/, `X-Request-Id missing on ${res.statusCode} ${res.body}`);
  return expectError(res, status, code);
}

async function followUpCount(): Promise<number> {
  const [row] = await app.runtime.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM follow_ups WHERE tenant_id = $1', [world.tenantId]);
  return row.n;
}

test('NUL and unpaired surrogates in path, query, body and headers are 400 naming the field, never stored', async () => {
  const before = await followUpCount();
  const cases: Array<[string, string, unknown, Record<string, string>, string]> = [
    ['GET', '/webhooks/whk_%00', undefined, {}, 'params.subscriptionId'],
    ['GET', '/crm/follow-ups?leadId=%00', undefined, {}, 'query.leadId'],
    ['GET', '/crm/follow-ups?conversationId=x%00', undefined, {}, 'query.conversationId'],
    // Lone surrogates cannot be written in UTF-8 (URLs, headers): only JSON escapes carry them.
    ['POST', '/crm/follow-ups', { leadId: world.leadId, conversationId: world.conversationId, messageDraft: 'a\u0000b' }, {}, 'body.messageDraft'],
    ['POST', '/crm/follow-ups', { leadId: world.leadId, conversationId: world.conversationId, reasonText: 'x\ud800' }, {}, 'body.reasonText'],
    ['POST', `/crm/follow-ups/fu_missing/send`, {}, { 'idempotency-key': 'k\u0000' }, 'headers.idempotency-key'],
  ];
  for (const [method, url, body, headers, path] of cases) {
    const res = await app.api(world.key, method, url, body, headers);
    assert.equal(res.statusCode, 400, `${method} ${url}: ${res.body}`);
    assertRefusal(res, 400, 'M2M_INVALID_REQUEST');
    assert.equal(issuesOf(res)[0].path, path, `${method} ${url}: ${res.body}`);
  }
  // A surrogate pair is well-formed text and is kept.
  const ok = await app.api(world.key, 'POST', '/crm/follow-ups', { leadId: world.leadId, conversationId: world.conversationId, messageDraft: 'ok 😀' });
  assert.equal(ok.statusCode, 201, ok.body);
  assert.equal(ok.json().followUp.messageDraft, 'ok 😀');
  assert.equal(await followUpCount(), before + 1);
});

test('unknown query parameters are 400 naming them on routes that declare no query', async () => {
  for (const [method, url, body] of [
    ['GET', '/webhooks?foo=bar&baz=1', undefined],
    ['POST', '/webhooks?foo=bar', { url: 'https://hooks.example.com/x', events: ['message.created'] }],
    ['GET', `/webhooks/whk_x?foo=1`, undefined],
  ] as const) {
    const res = await app.api(world.key, method, url, body);
    assertRefusal(res, 400, 'M2M_INVALID_REQUEST');
    const paths = issuesOf(res).map((issue) => issue.path);
    assert.ok(paths.includes('query.foo'), paths.join());
    if (url.includes('baz')) assert.ok(paths.includes('query.baz') || res.json().error.message.includes('baz'), res.body);
  }
  const subscriptions = await app.api(world.key, 'GET', '/webhooks');
  assert.equal(subscriptions.json().subscriptions.length, 0, 'the refused create wrote nothing');
});

test('date-times outside 1970-01-01T00:00:00Z .. 9998-12-31T23:59:59.999Z are 400; the edges are stored and printed as sent', async () => {
  const created = await app.api(world.key, 'POST', '/crm/follow-ups', { leadId: world.leadId, conversationId: world.conversationId });
  assert.equal(created.statusCode, 201, created.body);
  const id = created.json().followUp.followUpId as string;

  for (const bad of ['0000-01-01T00:00:00Z', '0001-01-01T00:00:00Z', '1969-12-31T23:59:59.999Z', '1970-01-01T00:30:00+01:00', '9999-01-01T00:00:00Z', '9999-12-31T23:59:59Z', '2024-06-30T23:59:60Z', '2023-02-29T10:00:00Z', '2024-01-01T24:00:00Z', '2024-01-01T00:00:00.1234567890Z', '2024-01-01T00:00:00+24:00', '2024-01-01']) {
    const list = await app.api(world.key, 'GET', `/crm/follow-ups?dueAfter=${encodeURIComponent(bad)}`);
    assertRefusal(list, 400, 'M2M_INVALID_REQUEST');
    assert.equal(issuesOf(list)[0].path, 'query.dueAfter', bad);
    const patch = await app.api(world.key, 'PATCH', `/crm/follow-ups/${id}`, { dueAt: bad });
    assertRefusal(patch, 400, 'M2M_INVALID_REQUEST');
    assert.equal(issuesOf(patch)[0].path, 'body.dueAt', bad);
  }

  for (const [sent, printed] of [
    ['1970-01-01T00:00:00Z', '1970-01-01T00:00:00.000Z'],
    ['1970-01-01T01:00:00+01:00', '1970-01-01T00:00:00.000Z'],
    ['9998-12-31T23:59:59.999Z', '9998-12-31T23:59:59.999Z'],
    ['9998-12-31T10:00:00-13:59', '9998-12-31T23:59:00.000Z'],
    ['2024-02-29T12:00:00.123456789Z', '2024-02-29T12:00:00.123Z'],
  ]) {
    const patch = await app.api(world.key, 'PATCH', `/crm/follow-ups/${id}`, { dueAt: sent });
    if (printed > created.json().followUp.expiresAt) {
      // Valid date-times, but a follow-up cannot be due after it expires (decisions 7.4).
      assertRefusal(patch, 400, 'M2M_INVALID_REQUEST');
      assert.equal(issuesOf(patch)[0].path, 'body.dueAt', sent);
    } else {
      assert.equal(patch.statusCode, 200, `${sent}: ${patch.body}`);
      assert.equal(patch.json().followUp.dueAt, printed);
      const read = await app.api(world.key, 'GET', `/crm/follow-ups/${id}`);
      assert.equal(read.json().followUp.dueAt, printed, sent);
    }
    const list = await app.api(world.key, 'GET', `/crm/follow-ups?dueAfter=${encodeURIComponent(sent)}`);
    assert.equal(list.statusCode, 200, `${sent}: ${list.body}`);
  }
});

test('deep, wide and many-error bodies are refused before validation walks them, with a bounded answer', async () => {
  const deep = JSON.stringify({ url: 'https://hooks.example.com/x', events: ['message.created'], description: 'x' }).replace('"x"}', `${'['.repeat(5000)}${']'.repeat(5000)}}`);
  const nested = await app.runtime.app.inject({
    method: 'POST',
    url: '/m2m/v1/webhooks',
    headers: { authorization: `Bearer ${world.key}`, 'content-type': 'application/json' },
    payload: deep,
  });
  assertRefusal(nested, 400, 'M2M_INVALID_REQUEST');
  assert.match(nested.json().error.message, /nesting must not exceed 32 levels/);

  const wide = await app.api(world.key, 'POST', '/webhooks', { url: 'https://hooks.example.com/x', events: Array.from({ length: 5000 }, () => 'message.created') });
  assertRefusal(wide, 400, 'M2M_INVALID_REQUEST');
  assert.deepEqual(issuesOf(wide)[0], { path: 'body.events', message: 'must not have more than 1000 items' });

  const manyUnknown = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`extra${i}`, i]));
  const noisy = await app.api(world.key, 'POST', '/webhooks', { url: 'https://hooks.example.com/x', events: ['message.created'], ...manyUnknown });
  const error = assertRefusal(noisy, 400, 'M2M_INVALID_REQUEST');
  assert.equal(issuesOf(noisy).length, 20);
  assert.equal(error.details.truncatedIssues, 480);
  assert.match(error.message, /and 480 more$/);
});

test('a route without a body takes at most 16 KB; a JSON route 1 MB; both answer 413 in the envelope', async () => {
  const small = await app.api(world.key, 'POST', '/webhooks/whk_x/rotate-secret', { padding: 'x'.repeat(20_000) });
  assertRefusal(small, 413, 'M2M_PAYLOAD_TOO_LARGE');
  const large = await app.api(world.key, 'POST', '/webhooks', { url: 'https://hooks.example.com/x', events: ['message.created'], description: 'x'.repeat(1_100_000) });
  assertRefusal(large, 413, 'M2M_PAYLOAD_TOO_LARGE');
  const text = await app.api(world.key, 'POST', '/webhooks', 'hello', { 'content-type': 'text/plain' });
  assertRefusal(text, 415, 'M2M_UNSUPPORTED_MEDIA_TYPE');
});

test('bad URL escapes and over-long path parameters answer the envelope with X-Request-Id', async () => {
  for (const path of ['/m2m/v1/webhooks/%ff', '/m2m/v1/webhooks/%', '/m2m/v1/webhooks/%zz', '/m2m/v1/webhooks/%c0%ae', `/m2m/v1/webhooks/${'a'.repeat(3000)}`]) {
    const res = await app.runtime.app.inject({ method: 'GET', url: path, headers: { authorization: `Bearer ${world.key}`, 'x-request-id': 'trace-1' } });
    const error = assertRefusal(res, 400, 'M2M_INVALID_REQUEST');
    assert.equal(res.headers['x-request-id'], 'trace-1');
    assert.deepEqual((error.details.issues as Array<{ path: string }>).map((i) => i.path), ['path']);
  }
});

/** Sends raw bytes to the listening server and returns the whole answer (the server closes the socket). */
async function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('end', () => resolve(answer));
    socket.on('error', (error) => (answer ? resolve(answer) : reject(error)));
    socket.write(bytes);
  });
}

function parseRaw(answer: string): { status: number; headers: Record<string, string>; body: { error: { code: string; details: Record<string, unknown> } } } {
  const [head, body] = answer.split('\r\n\r\n');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) };
}

test("Node's HTTP parser refusals (header overflow, repeated query parameters, malformed requests) answer the envelope", async () => {
  const server = app.runtime.app;
  await server.listen({ host: '127.0.0.1', port: 0 });
  const address = server.server.address();
  assert.ok(address && typeof address === 'object');
  const port = address.port;

  const overflow = parseRaw(await rawExchange(port, `GET /m2m/v1/webhooks HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
  assert.equal(overflow.status, 431);
  assert.equal(overflow.body.error.code, 'M2M_PAYLOAD_TOO_LARGE');
  assert.match(overflow.headers['x-request-id'], /^req_/);
  assert.equal(overflow.body.error.details.requestId, overflow.headers['x-request-id']);

  const repeated = parseRaw(await rawExchange(port, `GET /m2m/v1/webhooks?${'a=1&'.repeat(5000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
  assert.equal(repeated.status, 431);
  assert.equal(repeated.body.error.code, 'M2M_PAYLOAD_TOO_LARGE');

  const malformed = parseRaw(await rawExchange(port, 'GET /m2m/v1/webhooks HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
  assert.equal(malformed.status, 400);
  assert.equal(malformed.body.error.code, 'M2M_INVALID_REQUEST');
  assert.match(malformed.headers['x-request-id'], /^req_/);
});

test('MCP responses carry X-Request-Id (hijacked replies included)', async () => {
  const res = await app.runtime.app.inject({
    method: 'POST',
    url: '/m2m/v1/mcp',
    headers: { authorization: `Bearer ${world.key}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'x-request-id': 'mcp-trace' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
  });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.headers['x-request-id'], 'mcp-trace');
});

test('bodies of a megabyte or more are parsed off the event loop by the same rules; an over-long text is refused unread', async () => {
  const { key } = await app.tenantWithKey(['knowledge:write', 'knowledge:read']);
  const post = (payload: string) =>
    app.runtime.app.inject({ method: 'POST', url: '/m2m/v1/knowledge/sources', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, payload });
  const notes = 'Check-in from 15:00, check-out until 11:00. Breakfast is served from 7:00 to 10:30.\n'.repeat(10_000);
  const file = JSON.stringify({ sourceType: 'file', title: 'House notes', file: { filename: 'notes.txt', contentType: 'text/plain', contentBase64: Buffer.from(notes).toString('base64') } });
  assert.ok(file.length >= 1024 * 1024, 'the body takes the off-thread path');
  const created = await post(file);
  assert.equal(created.statusCode, 201, created.body);
  assert.equal(created.json().source.title, 'House notes');

  const padding = 'y'.repeat(1024 * 1024);
  assertRefusal(await post(`{"sourceType":"text","title":"x","text":"${padding}","__proto__":{"admin":true}}`), 400, 'M2M_INVALID_REQUEST');
  assertRefusal(await post(`{"sourceType":"text","title":"x","text":"${padding}","constructor":{"prototype":{"admin":true}}}`), 400, 'M2M_INVALID_REQUEST');
  const malformed = assertRefusal(await post(`{"sourceType":"text","title":"x","text":"${padding}"`), 400, 'M2M_INVALID_REQUEST');
  assert.equal(malformed.message, 'body is not valid JSON');

  // Over twice the limit in UTF-16 units: refused before validation counts its characters, in validation's words.
  const long = await post(JSON.stringify({ sourceType: 'text', title: 'x', text: 'x'.repeat(2_000_001) }));
  assertRefusal(long, 400, 'M2M_INVALID_REQUEST');
  assert.deepEqual(issuesOf(long), [{ path: 'body.text', message: 'must NOT have more than 1000000 characters' }]);
  // Just over the limit: validation's own count answers the same.
  const over = assertRefusal(await post(JSON.stringify({ sourceType: 'text', title: 'x', text: 'x'.repeat(1_000_001) })), 400, 'M2M_INVALID_REQUEST');
  assert.equal(over.message, 'body.text: must NOT have more than 1000000 characters');
  // Astral characters are two UTF-16 units each but one character: 1,000,000 of them are accepted.
  const astral = await post(JSON.stringify({ sourceType: 'text', title: 'Emoji', text: '😀'.repeat(1_000_000) }));
  assert.equal(astral.statusCode, 201, astral.body.slice(0, 300));
});

test('the JSON parser thread cuts a string the input guard refuses for its length, and nothing else', async () => {
  const thread = new JsonParserThread(50);
  const caps: Array<[string, number]> = [['body.text', 1000], ['body.file.name', 10], ['body.list.0', 10], ['body.missing.deep', 1], ['body', 5]];
  const body = { text: 'x'.repeat(5000), file: { name: 'n'.repeat(20), other: 'o'.repeat(50) }, list: ['l'.repeat(40), 'm'.repeat(40)], missing: 'flat' };
  const parsed = (await thread.parse(Buffer.from(JSON.stringify(body)), caps)) as typeof body;
  // One character over twice the cap: still refused by the guard, with the same words.
  assert.equal(parsed.text, 'x'.repeat(2001));
  assert.equal(parsed.file.name, 'n'.repeat(20), 'exactly twice the cap is left to validation, whole');
  assert.equal(parsed.file.other, body.file.other);
  assert.deepEqual(parsed.list, ['l'.repeat(21), 'm'.repeat(40)]);
  assert.equal(parsed.missing, 'flat');
  assert.deepEqual(await thread.parse(Buffer.from(JSON.stringify(body))), body, 'no caps: the body as sent');
  assert.deepEqual(await thread.parse(Buffer.from('"just a string"'), caps), 'just a string');
});

test('the JSON parser thread stops once idle (giving its heap back) and starts again for the next big body', async () => {
  const thread = new JsonParserThread(50);
  assert.equal(thread.running, false);
  const body = JSON.stringify({ text: 'z'.repeat(2 * 1024 * 1024) });
  const big = Buffer.from(body);
  assert.deepEqual(await thread.parse(big), JSON.parse(body));
  assert.equal(big.buffer.byteLength, 0, 'a buffer that owns its memory is handed over, not copied');
  assert.equal(thread.running, true);
  // Requests in flight keep it running; the idle clock starts when the last one is answered. Small buffers
  // share Node's pool: they are copied, and the pool stays usable.
  const small = Buffer.from('{"a":1}');
  const [a, b] = await Promise.all([thread.parse(small), thread.parse(Buffer.from('[1,2]'))]);
  assert.deepEqual([a, b], [{ a: 1 }, [1, 2]]);
  assert.equal(small.toString(), '{"a":1}');
  await eventually(async () => !thread.running, 5_000, 'the idle thread to stop');
  await assert.rejects(thread.parse(Buffer.from('{"__proto__":{"x":1}}')));
  assert.deepEqual(await thread.parse(Buffer.from('{"again":true}')), { again: true });
});
