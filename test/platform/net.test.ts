import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, buildConnector, request } from 'undici';
import { guardedConnector } from '../../src/net/connector.js';
import { classifyNetError } from '../../src/net/failure.js';
import { BlockedDestinationError, type Resolver } from '../../src/net/guard.js';
import { Stop, followRedirects } from '../../src/net/redirects.js';

const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

async function server(handler: http.RequestListener): Promise<{ port: number; hits: string[] }> {
  const hits: string[] = [];
  const srv = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    handler(req, res);
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => srv.close(() => resolve())));
  return { port: (srv.address() as AddressInfo).port, hits };
}

function agent(allowPrivate: boolean, resolver?: Resolver, timeoutMs = 2000): Agent {
  const a = new Agent({ connect: guardedConnector(buildConnector, { allowPrivate, timeoutMs, resolver }), headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  closers.push(() => a.close());
  return a;
}

/** The error a GET through `dispatcher` fails with (the test fails when it succeeds). */
async function failureOf(url: string, dispatcher: Agent, signal?: AbortSignal): Promise<unknown> {
  try {
    const res = await request(url, { dispatcher, signal });
    await res.body.text();
  } catch (error) {
    return error;
  }
  assert.fail(`GET ${url} answered`);
}

const toLoopback: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];

test('guarded connector: with private destinations allowed, a name resolved to 127.0.0.1 is reached', async () => {
  const { port, hits } = await server((_req, res) => res.end('ok'));
  const res = await request(`http://hotel.example:${port}/x`, { dispatcher: agent(true, toLoopback) });
  assert.equal(res.statusCode, 200);
  assert.equal(await res.body.text(), 'ok');
  assert.deepEqual(hits, ['/x']);
});

test('guarded connector: a name resolving to a private address is refused before any packet is sent', async () => {
  const { port, hits } = await server((_req, res) => res.end('ok'));
  const failure = classifyNetError(await failureOf(`http://hotel.example:${port}/`, agent(false, toLoopback)));
  assert.equal(failure.code, 'blocked_destination');
  assert.match(failure.blockedReason ?? '', /non-public address 127\.0\.0\.1/);
  assert.deepEqual(hits, [], 'nothing reached the server');
});

test('guarded connector: an IP literal of a private range is refused; the error is a BlockedDestinationError in the chain', async () => {
  const { port, hits } = await server((_req, res) => res.end('ok'));
  const error = await failureOf(`http://127.0.0.1:${port}/`, agent(false));
  const failure = classifyNetError(error);
  assert.equal(failure.code, 'blocked_destination');
  assert.match(failure.message, /^BLOCKED_DESTINATION: destination 127\.0\.0\.1 is not a public address/);
  assert.deepEqual(hits, []);
});

test('failure classes: refused connection, DNS not found, temporary DNS failure, deadline', async () => {
  const closed = await server((_req, res) => res.end('ok'));
  const port = closed.port;
  await closers.pop()!();

  const refused = classifyNetError(await failureOf(`http://127.0.0.1:${port}/`, agent(true)));
  assert.equal(refused.code, 'connection');
  assert.match(refused.message, /ECONNREFUSED/);

  const notFound = classifyNetError(
    await failureOf('http://gone.example/', agent(true, async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND gone.example'), { code: 'ENOTFOUND' });
    })),
  );
  assert.deepEqual([notFound.code, notFound.hostNotFound], ['dns', true]);

  const again = classifyNetError(
    await failureOf('http://flaky.example/', agent(true, async () => {
      throw Object.assign(new Error('getaddrinfo EAI_AGAIN flaky.example'), { code: 'EAI_AGAIN' });
    })),
  );
  assert.deepEqual([again.code, again.hostNotFound], ['dns', false], 'a temporary DNS failure is not a vanished host');

  const slow = await server(() => undefined);
  const deadline = AbortSignal.timeout(200);
  const timedOut = classifyNetError(await failureOf(`http://127.0.0.1:${slow.port}/`, agent(true), deadline), deadline.aborted);
  assert.equal(timedOut.code, 'timeout');
});

test('failure classes: TLS codes, causes and AggregateError members are read; messages are one bounded line', () => {
  const tls = classifyNetError(new Error('fetch failed', { cause: Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }) }));
  assert.deepEqual([tls.code, tls.message], ['tls', 'DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate']);
  const aggregate = classifyNetError(new AggregateError([Object.assign(new Error('x'), { code: 'ECONNRESET' }), new BlockedDestinationError('no')]));
  assert.equal(aggregate.code, 'blocked_destination', 'a blocked member wins over a connection error');
  const long = classifyNetError(Object.assign(new Error(`line one\nline two ${'x'.repeat(1000)}`), { code: 'ECONNRESET' }));
  assert.equal(long.code, 'connection');
  assert.ok(!long.message.includes('\n'));
  assert.ok(long.message.length <= 300);
  assert.equal(classifyNetError(Object.assign(new Error('x'), { code: 'ECONNRESET' }), true).code, 'timeout', 'a passed deadline makes it a timeout');
});

/** A server whose /r/N redirects to /r/N-1 and /r/0 answers 200 with the body "end". */
async function redirectChain() {
  return server((req, res) => {
    const n = Number(/^\/r\/(\d+)/.exec(req.url ?? '')?.[1] ?? '0');
    if (n > 0) res.writeHead(302, { location: `/r/${n - 1}` }).end();
    else res.end('end');
  });
}

async function get(dispatcher: Agent, url: URL): Promise<{ status: number; location?: string; body: string }> {
  const res = await request(url, { dispatcher });
  const location = res.headers.location;
  return { status: res.statusCode, location: Array.isArray(location) ? location[0] : location, body: await res.body.text() };
}

test('redirect follower: follows up to the limit, each hop through the caller\'s check', async () => {
  const { port, hits } = await redirectChain();
  const dispatcher = agent(true);
  const checked: string[] = [];
  const steps = {
    maxRedirects: 5,
    request: (url: URL) => get(dispatcher, url),
    next: (location: string, from: URL) => {
      const next = new URL(location, from);
      checked.push(next.pathname);
      return next;
    },
  };
  const five = await followRedirects(new URL(`http://127.0.0.1:${port}/r/5`), steps);
  assert.equal(five.kind, 'answer');
  assert.ok(five.kind === 'answer');
  assert.equal(five.url.pathname, '/r/0');
  assert.equal(five.answer.body, 'end');
  assert.deepEqual(checked, ['/r/4', '/r/3', '/r/2', '/r/1', '/r/0']);

  hits.length = 0;
  const six = await followRedirects(new URL(`http://127.0.0.1:${port}/r/6`), steps);
  assert.equal(six.kind, 'too_many');
  assert.ok(six.kind === 'too_many');
  assert.equal(six.url.pathname, '/r/0', 'the hop past the limit is named, never requested');
  assert.equal(hits.length, 6);
});

test('redirect follower: a Stop from the check or the request ends the walk with the caller\'s value', async () => {
  const { port, hits } = await redirectChain();
  const dispatcher = agent(true);
  const refused = await followRedirects<Awaited<ReturnType<typeof get>>, string>(new URL(`http://127.0.0.1:${port}/r/3`), {
    maxRedirects: 5,
    request: (url) => get(dispatcher, url),
    next: (location) => (location === '/r/1' ? new Stop('refused /r/1') : new URL(location, `http://127.0.0.1:${port}`)),
  });
  assert.deepEqual(refused, { kind: 'stopped', value: 'refused /r/1' });
  assert.deepEqual(hits, ['/r/3', '/r/2']);

  const early = await followRedirects<Awaited<ReturnType<typeof get>>, string>(new URL(`http://127.0.0.1:${port}/r/3`), {
    maxRedirects: 5,
    request: async () => new Stop('not asked'),
    next: () => assert.fail('no answer to follow'),
  });
  assert.deepEqual(early, { kind: 'stopped', value: 'not asked' });
});
