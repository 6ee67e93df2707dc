import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { BodyRate, UNMETERED_BODY_BYTES } from '../../src/http/body-rate.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// Request bodies past their first 64 KiB share one read rate per node (docs/decisions.md, "Big bodies share one
// rate"), so a flood of big uploads cannot take the node from everything else.

const KIB = 1024;

test('the rate books bytes after those booked before them, with one idle second as credit', () => {
  let now = 10_000;
  const rate = new BodyRate(100 * KIB, () => now);
  assert.equal(rate.reserve(100 * KIB), 0, 'an idle node reads a second of the rate at once');
  assert.equal(rate.reserve(50 * KIB), 500);
  assert.equal(rate.reserve(50 * KIB), 1000, 'the next booking waits behind the first');
  now += 400;
  assert.equal(rate.reserve(10 * KIB), 700);
  now += 5_000;
  assert.equal(rate.reserve(100 * KIB), 0, 'idle time earns credit again');
  assert.equal(rate.reserve(100 * KIB), 1000, 'but never more than a second of it');
});

const RATE = 64 * KIB;
let app: TestApp;
let port: number;
let key: string;

before(async () => {
  app = await startTestApp({ env: { BODY_BYTES_PER_SECOND: String(RATE) } });
  ({ key } = await app.tenantWithKey(['knowledge:write', 'knowledge:read']));
  await app.runtime.app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.runtime.app.server.address();
  assert.ok(address && typeof address === 'object');
  port = address.port;
});
after(() => app.close());

interface Answer {
  status: number;
  body: string;
  finishedAt: number;
}

/** A request over a real socket; `chunked` sends the body without Content-Length. */
function send(method: string, path: string, body?: string, chunked = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (body !== undefined && !chunked) headers['content-length'] = String(Buffer.byteLength(body));
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, finishedAt: performance.now() }));
    });
    req.on('error', reject);
    if (body !== undefined && chunked) {
      for (let offset = 0; offset < body.length; offset += 16 * KIB) req.write(body.slice(offset, offset + 16 * KIB));
    }
    req.end(body !== undefined && !chunked ? body : undefined);
  });
}

const textSource = (title: string, bytes: number) => JSON.stringify({ sourceType: 'text', title, text: 'x'.repeat(bytes) });

test('big bodies wait for the rate and are then served whole, while small bodies and other requests go on', async () => {
  const started = performance.now();
  // 448 KiB past the unmetered starts and 64 KiB of credit: the last byte is read no earlier than 6 s in, and the
  // chunked body's own 128 KiB no earlier than 1 s in, even if it had the rate to itself.
  const sized = send('POST', '/m2m/v1/knowledge/sources', textSource('Sized', 320 * KIB + UNMETERED_BODY_BYTES));
  const chunked = send('POST', '/m2m/v1/knowledge/sources', textSource('Chunked', 128 * KIB + UNMETERED_BODY_BYTES), true);
  await new Promise((resolve) => setTimeout(resolve, 200));

  const [health, list, small] = await Promise.all([
    send('GET', '/healthz'),
    send('GET', '/m2m/v1/knowledge/items?limit=5'),
    send('POST', '/m2m/v1/knowledge/sources', textSource('Small', UNMETERED_BODY_BYTES - KIB)),
  ]);
  assert.equal(health.status, 200);
  assert.equal(list.status, 200, list.body);
  assert.equal(small.status, 201, small.body);

  const [sizedAnswer, chunkedAnswer] = await Promise.all([sized, chunked]);
  assert.equal(sizedAnswer.status, 201, sizedAnswer.body);
  assert.equal(chunkedAnswer.status, 201, chunkedAnswer.body);
  for (const other of [health, list, small]) assert.ok(other.finishedAt < sizedAnswer.finishedAt, 'nothing waited for the big bodies');
  assert.ok(chunkedAnswer.finishedAt - started >= 1_000, 'the chunked body was read at the rate');
  assert.ok(Math.max(sizedAnswer.finishedAt, chunkedAnswer.finishedAt) - started >= 5_000, 'the big bodies were read at the rate');

  const items: Array<{ title: string }> = JSON.parse((await send('GET', '/m2m/v1/knowledge/items?limit=10')).body).items;
  const titles = items.map((item) => item.title).sort();
  assert.deepEqual(titles, ['Chunked', 'Sized', 'Small']);
});

test('a client that goes away while its body waits leaves nothing behind', async () => {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(`POST /m2m/v1/knowledge/sources HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${1024 * KIB}\r\n\r\n`);
  socket.write(`{"sourceType":"text","title":"Gone","text":"${'x'.repeat(256 * KIB)}`);
  await new Promise((resolve) => setTimeout(resolve, 300));
  socket.destroy();
  // The chunks it booked are still waiting on their timers; when they fire, nothing breaks.
  await new Promise((resolve) => setTimeout(resolve, 3_500));
  assert.equal((await send('GET', '/healthz')).status, 200);
  const items: Array<{ title: string }> = JSON.parse((await send('GET', '/m2m/v1/knowledge/items?limit=10')).body).items;
  assert.ok(!items.some((item) => item.title === 'Gone'));
});

test('a big body refused before it is read is not read: the answer closes the connection', async () => {
  const socket = net.connect(port, '127.0.0.1');
  let answer = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (answer += chunk));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  // No key: authentication refuses it before the body is read. Only the start of the 8 MiB body is ever sent.
  socket.write(`POST /m2m/v1/knowledge/sources HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${8 * 1024 * KIB}\r\n\r\n`);
  socket.write(`{"sourceType":"text","title":"Refused","text":"${'x'.repeat(256 * KIB)}`);
  const timeout = new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), 10_000).unref());
  assert.notEqual(await Promise.race([closed, timeout]), 'open', 'the server closed the connection rather than wait to read the rest');
  assert.match(answer, /^HTTP\/1\.1 401 /);
  assert.match(answer, /\r\nconnection: close\r\n/i);

  // A small body refused the same way keeps its connection.
  const agent = new http.Agent({ keepAlive: true });
  const small = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/m2m/v1/knowledge/sources', headers: { 'content-type': 'application/json' }, agent }, resolve);
    req.on('error', reject);
    req.end('{}');
  });
  small.resume();
  agent.destroy();
  assert.equal(small.statusCode, 401);
  assert.equal(small.headers.connection, 'keep-alive');
});

test('a GET carrying a body no route reads is answered with Connection: close, and the next request on the client is answered', async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (body?: string) =>
    new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
      const headers: Record<string, string> = { authorization: `Bearer ${key}` };
      if (body !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
      const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: '/m2m/v1/knowledge/items?limit=1', headers, agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
      });
      // The server may close before it has read the whole body: the answer has come by then.
      req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
      req.end(body);
    });
  try {
    const big = await get(JSON.stringify({ filler: 'x'.repeat(1_500_000) }));
    assert.equal(big.status, 200);
    assert.equal(big.connection, 'close');
    const small = await get(JSON.stringify({ a: 1 }));
    assert.equal(small.connection, 'close', 'any body on a GET: the connection is not reused');
    const next = await get();
    assert.equal(next.status, 200);
    assert.equal(next.connection, 'keep-alive', 'a GET without a body keeps its connection');
  } finally {
    agent.destroy();
  }
});
