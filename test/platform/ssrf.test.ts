import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  BlockedDestinationError,
  isPublicIPv4,
  resolvePublicIPv4,
  validateWebhookUrl,
  type Resolver,
} from '../../src/net/guard.js';
import { WebhookHttpClient } from '../../src/webhooks/http-client.js';

// ---------------------------------------------------------------- isPublicIPv4

test('isPublicIPv4: special-purpose ranges are not public (first and last address)', () => {
  const inside = [
    '0.0.0.0', '0.255.255.255',
    '10.0.0.0', '10.255.255.255',
    '100.64.0.0', '100.127.255.255',
    '127.0.0.1', '127.255.255.255',
    '169.254.0.0', '169.254.169.254', '169.254.255.255',
    '172.16.0.0', '172.31.255.255',
    '192.0.0.0', '192.0.0.255',
    '192.0.2.0', '192.0.2.255',
    '192.88.99.0', '192.88.99.255',
    '192.168.0.0', '192.168.255.255',
    '198.18.0.0', '198.19.255.255',
    '198.51.100.0', '198.51.100.255',
    '203.0.113.0', '203.0.113.255',
    '224.0.0.0', '239.255.255.255',
    '240.0.0.0', '255.255.255.255',
  ];
  for (const ip of inside) assert.equal(isPublicIPv4(ip), false, ip);
});

test('isPublicIPv4: neighbours just outside the ranges are public', () => {
  const outside = [
    '1.0.0.0', '9.255.255.255', '11.0.0.0',
    '100.63.255.255', '100.128.0.0',
    '126.255.255.255', '128.0.0.0',
    '169.253.255.255', '169.255.0.0',
    '172.15.255.255', '172.32.0.0',
    '191.255.255.255', '192.0.1.0', '192.0.3.0',
    '192.88.98.255', '192.88.100.0',
    '192.167.255.255', '192.169.0.0',
    '198.17.255.255', '198.20.0.0',
    '198.51.99.255', '198.51.101.0',
    '203.0.112.255', '203.0.114.0',
    '223.255.255.255',
    '8.8.8.8', '1.1.1.1',
  ];
  for (const ip of outside) assert.equal(isPublicIPv4(ip), true, ip);
});

test('isPublicIPv4: IPv4-mapped IPv6 is judged by the embedded address', () => {
  assert.equal(isPublicIPv4('::ffff:127.0.0.1'), false);
  assert.equal(isPublicIPv4('::ffff:7f00:1'), false);
  assert.equal(isPublicIPv4('::ffff:10.1.2.3'), false);
  assert.equal(isPublicIPv4('::ffff:0.0.0.0'), false);
  assert.equal(isPublicIPv4('0:0:0:0:0:ffff:a9fe:a9fe'), false); // 169.254.169.254
  assert.equal(isPublicIPv4('::ffff:8.8.8.8'), true);
  assert.equal(isPublicIPv4('::FFFF:808:808'), true);
});

test('isPublicIPv4: plain IPv6 and garbage are not public IPv4', () => {
  for (const ip of ['::1', '::', '2606:4700:4700::1111', 'fe80::1', '::127.0.0.1', 'example.com', '', '1.2.3', '256.1.1.1']) {
    assert.equal(isPublicIPv4(ip), false, ip);
  }
});

// ------------------------------------------------------------ resolvePublicIPv4

function fakeResolver(table: Record<string, Array<{ address: string; family: 4 | 6 }>>): Resolver {
  return async (hostname) => {
    const answers = table[hostname];
    if (!answers) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    }
    return answers;
  };
}

const v4 = (address: string) => ({ address, family: 4 as const });
const v6 = (address: string) => ({ address, family: 6 as const });

test('resolvePublicIPv4: all-public answers return the IPv4 list', async () => {
  const resolver = fakeResolver({ 'hooks.example': [v4('93.184.216.34'), v4('8.8.4.4')] });
  assert.deepEqual(await resolvePublicIPv4('hooks.example', { allowPrivate: false, resolver }), ['93.184.216.34', '8.8.4.4']);
});

test('resolvePublicIPv4: one private answer among public ones blocks the host', async () => {
  const resolver = fakeResolver({ 'mixed.example': [v4('8.8.8.8'), v4('10.0.0.5')] });
  await assert.rejects(resolvePublicIPv4('mixed.example', { allowPrivate: false, resolver }), (err: unknown) => {
    assert.ok(err instanceof BlockedDestinationError);
    assert.equal(err.code, 'BLOCKED_DESTINATION');
    assert.match(err.message, /10\.0\.0\.5/);
    return true;
  });
});

test('resolvePublicIPv4: a non-public IPv6 answer blocks the host too', async () => {
  for (const bad of ['::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '2001:db8::1', 'ff02::1', '::']) {
    const resolver = fakeResolver({ 'h.example': [v4('8.8.8.8'), v6(bad)] });
    await assert.rejects(resolvePublicIPv4('h.example', { allowPrivate: false, resolver }), BlockedDestinationError, bad);
  }
});

test('resolvePublicIPv4: IPv6-only hosts are blocked', async () => {
  const resolver = fakeResolver({ 'v6only.example': [v6('2606:4700:4700::1111')] });
  await assert.rejects(resolvePublicIPv4('v6only.example', { allowPrivate: false, resolver }), /IPv6-only destinations are unsupported/);
});

test('resolvePublicIPv4: public IPv4 plus global IPv6 returns only the IPv4 answers', async () => {
  const resolver = fakeResolver({ 'dual.example': [v6('2606:4700:4700::1111'), v4('1.1.1.1'), v6('2a00:1450::1'), v4('1.0.0.1')] });
  assert.deepEqual(await resolvePublicIPv4('dual.example', { allowPrivate: false, resolver }), ['1.1.1.1', '1.0.0.1']);
});

test('resolvePublicIPv4: allowPrivate returns every answer, IPv4 first', async () => {
  const resolver = fakeResolver({ 'dev.example': [v6('::1'), v4('127.0.0.1'), v4('10.0.0.1')] });
  assert.deepEqual(await resolvePublicIPv4('dev.example', { allowPrivate: true, resolver }), ['127.0.0.1', '10.0.0.1', '::1']);
});

test('resolvePublicIPv4: IP literals are checked without resolving', async () => {
  const resolver: Resolver = async () => assert.fail('resolver must not be called for literals');
  assert.deepEqual(await resolvePublicIPv4('8.8.8.8', { allowPrivate: false, resolver }), ['8.8.8.8']);
  await assert.rejects(resolvePublicIPv4('127.0.0.1', { allowPrivate: false, resolver }), BlockedDestinationError);
  await assert.rejects(resolvePublicIPv4('[2606:4700:4700::1111]', { allowPrivate: false, resolver }), BlockedDestinationError);
  await assert.rejects(resolvePublicIPv4('::1', { allowPrivate: false, resolver }), BlockedDestinationError);
  assert.deepEqual(await resolvePublicIPv4('[::1]', { allowPrivate: true, resolver }), ['::1']);
});

test('resolvePublicIPv4: resolver errors pass through', async () => {
  const resolver = fakeResolver({});
  await assert.rejects(resolvePublicIPv4('nope.example', { allowPrivate: false, resolver }), { code: 'ENOTFOUND' });
  await assert.rejects(resolvePublicIPv4('empty.example', { allowPrivate: false, resolver: async () => [] }), { code: 'ENOTFOUND' });
});

// ------------------------------------------------------------ validateWebhookUrl

function reasonOf(raw: string, allowPrivate = false): string | null {
  const result = validateWebhookUrl(raw, { allowPrivate });
  return result.ok ? null : result.reason;
}

test('validateWebhookUrl: accepts public https urls', () => {
  const result = validateWebhookUrl('https://hooks.example.com/in?x=1', { allowPrivate: false });
  assert.ok(result.ok);
  assert.equal(result.url.hostname, 'hooks.example.com');
  assert.equal(reasonOf('https://hooks.example.com:443/in'), null);
  assert.equal(reasonOf('https://8.8.8.8/in'), null);
});

test('validateWebhookUrl: rejects unsafe urls when private destinations are not allowed', () => {
  assert.equal(reasonOf('http://hooks.example.com/in'), 'url must use https');
  assert.match(reasonOf('https://hooks.example.com:8443/in') ?? '', /port/);
  assert.match(reasonOf('https://user:pass@hooks.example.com/in') ?? '', /credentials/);
  assert.match(reasonOf('https://user@hooks.example.com/in') ?? '', /credentials/);
  for (const raw of [
    'https://localhost/in',
    'https://LOCALHOST./in',
    'https://api.localhost/in',
    'https://printer.local/in',
    'https://db.internal/in',
    'https://router.home.arpa/in',
    'https://127.0.0.1/in',
    'https://10.1.2.3/in',
    'https://169.254.169.254/latest',
    'https://0x7f.1/in',
    'https://2130706433/in',
    'https://[::1]/in',
    'https://[2606:4700:4700::1111]/in',
  ]) {
    assert.notEqual(reasonOf(raw), null, raw);
  }
});

test('validateWebhookUrl: rejects malformed urls in every mode', () => {
  for (const allowPrivate of [false, true]) {
    assert.notEqual(reasonOf('not a url', allowPrivate), null);
    assert.notEqual(reasonOf('/relative/path', allowPrivate), null);
    assert.notEqual(reasonOf('ftp://hooks.example.com/', allowPrivate), null);
    assert.notEqual(reasonOf('https://hooks.example.com/#frag', allowPrivate), null);
    assert.notEqual(reasonOf(`https://hooks.example.com/${'a'.repeat(2048)}`, allowPrivate), null);
  }
});

test('validateWebhookUrl: allowPrivate accepts local http endpoints', () => {
  assert.equal(reasonOf('http://127.0.0.1:5555/x', true), null);
  assert.equal(reasonOf('http://localhost:3000/hooks', true), null);
  assert.equal(reasonOf('https://[::1]:8443/x', true), null);
});

// ------------------------------------------------------------ WebhookHttpClient

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface TestServer {
  port: number;
  received: Received[];
  connections: number;
  close(): Promise<void>;
}

const servers: TestServer[] = [];
const clients: WebhookHttpClient[] = [];

async function startServer(respond: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<TestServer> {
  const state = { received: [] as Received[], connections: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.on('error', () => {});
      respond(req, res);
    });
  });
  server.on('connection', (socket) => {
    state.connections++;
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const handle: TestServer = {
    port: (server.address() as AddressInfo).port,
    get received() {
      return state.received;
    },
    get connections() {
      return state.connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(handle);
  return handle;
}

function makeClient(opts: Partial<ConstructorParameters<typeof WebhookHttpClient>[0]> = {}): WebhookHttpClient {
  const client = new WebhookHttpClient({ allowPrivate: true, timeoutMs: 2000, userAgent: 'test-webhooks/1.0', ...opts });
  clients.push(client);
  return client;
}

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(servers.map((s) => s.close()));
});

test('client: 2xx is ok and the server gets the exact body and headers', async () => {
  const server = await startServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks'));
  const client = makeClient();
  const body = JSON.stringify({ id: 'evt_1', type: 'message.created', data: { text: 'héllo' } });

  const result = await client.post(`http://127.0.0.1:${server.port}/hooks?x=1`, body, {
    'X-Webhook-Signature': 't=1,v1=abc',
    'Content-Type': 'text/plain', // overridden: webhooks are always JSON
  });

  assert.equal(result.ok, true);
  assert.equal(result.httpStatus, 200);
  assert.equal(result.failureCode, undefined);
  assert.ok(result.durationMs >= 0);
  assert.equal(server.received.length, 1);
  const [req] = server.received;
  assert.equal(req.method, 'POST');
  assert.equal(req.url, '/hooks?x=1');
  assert.equal(req.body, body);
  assert.equal(req.headers['user-agent'], 'test-webhooks/1.0');
  assert.equal(req.headers['content-type'], 'application/json');
  assert.equal(req.headers['x-webhook-signature'], 't=1,v1=abc');
});

test('client: 500 is an http_status failure', async () => {
  const server = await startServer((_req, res) => res.writeHead(500).end('boom'));
  const result = await makeClient().post(`http://127.0.0.1:${server.port}/`, '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'http_status');
  assert.equal(result.httpStatus, 500);
});

test('client: redirects are reported, not followed', async () => {
  const server = await startServer((req, res) => {
    if (req.url === '/target') res.writeHead(200).end('should not be reached');
    else res.writeHead(302, { location: `http://127.0.0.1:${server.port}/target` }).end();
  });
  const result = await makeClient().post(`http://127.0.0.1:${server.port}/start`, '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'redirect');
  assert.equal(result.httpStatus, 302);
  assert.deepEqual(server.received.map((r) => r.url), ['/start']);
});

test('client: a slow server hits the timeout', async () => {
  const server = await startServer((_req, res) => {
    setTimeout(() => res.writeHead(200).end(), 3000).unref();
  });
  const result = await makeClient({ timeoutMs: 300 }).post(`http://127.0.0.1:${server.port}/`, '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'timeout');
  // Given up at the deadline, not when the server answered (3 s).
  assert.ok(result.durationMs >= 250 && result.durationMs < 3000, `durationMs ${result.durationMs}`);
});

test('client: a body that trickles past the deadline also times out', async () => {
  const server = await startServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('a');
    const timer = setInterval(() => res.write('a'), 100);
    res.on('close', () => clearInterval(timer));
  });
  const result = await makeClient({ timeoutMs: 300 }).post(`http://127.0.0.1:${server.port}/`, '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'timeout');
});

test('client: a closed port is a connection failure', async () => {
  const server = await startServer(() => {});
  const { port } = server;
  await server.close();
  const result = await makeClient().post(`http://127.0.0.1:${port}/`, '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'connection');
  assert.match(result.errorMessage ?? '', /ECONNREFUSED/);
});

test('client: a socket destroyed mid-response is a connection failure', async () => {
  const server = await startServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }); // chunked: no content-length
    res.write('{"partial":');
    setTimeout(() => res.socket?.destroy(), 50);
  });
  const result = await makeClient().post(`http://127.0.0.1:${server.port}/`, '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'connection');
  assert.ok((result.errorMessage ?? '').length <= 300);
  assert.doesNotMatch(result.errorMessage ?? '', /\n|\s+at /);
});

test('client: a TLS handshake failure is a tls failure', async () => {
  const server = await startServer((_req, res) => res.writeHead(200).end());
  const result = await makeClient().post(`https://127.0.0.1:${server.port}/`, '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'tls');
  assert.equal(server.received.length, 0);
});

test('client: a huge response body is not read to the end', async () => {
  const megabyte = Buffer.alloc(1024 * 1024, 'x');
  const server = await startServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(megabyte);
  });
  const result = await makeClient({ timeoutMs: 1000 }).post(`http://127.0.0.1:${server.port}/`, '{}', {});
  assert.equal(result.ok, true);
  assert.equal(result.httpStatus, 200);
});

test('client: keep-alive connections are reused for small responses', async () => {
  const server = await startServer((_req, res) => res.writeHead(204).end());
  const client = makeClient();
  for (let i = 0; i < 6; i++) {
    const result = await client.post(`http://127.0.0.1:${server.port}/`, '{}', {});
    assert.equal(result.ok, true);
  }
  assert.equal(server.received.length, 6);
  // undici still counts the first connection as busy for a tick after the body ends,
  // so back-to-back requests alternate between two sockets rather than sharing one.
  assert.ok(server.connections <= 2, `connections ${server.connections}`);
});

test('client: a host resolving to a private address is blocked before connecting', async () => {
  const server = await startServer((_req, res) => res.writeHead(200).end());
  const resolver = fakeResolver({ 'receiver.test': [v4('127.0.0.1')] });
  const client = makeClient({ allowPrivate: false, resolver });

  const result = await client.post('https://receiver.test/', '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'blocked_destination');
  assert.match(result.errorMessage ?? '', /BLOCKED_DESTINATION/);

  const viaPort = await client.post(`http://receiver.test:${server.port}/`, '{}', {});
  assert.equal(viaPort.failureCode, 'blocked_destination');
  assert.equal(server.received.length, 0);
  assert.equal(server.connections, 0);
});

test('client: an IP-literal private url is blocked', async () => {
  const server = await startServer((_req, res) => res.writeHead(200).end());
  const client = makeClient({ allowPrivate: false });
  for (const url of [`http://127.0.0.1:${server.port}/`, `http://[::ffff:127.0.0.1]:${server.port}/`, `http://[::1]:${server.port}/`]) {
    const result = await client.post(url, '{}', {});
    assert.equal(result.ok, false, url);
    assert.equal(result.failureCode, 'blocked_destination', url);
  }
  assert.equal(server.received.length, 0);
  assert.equal(server.connections, 0);
});

test('client: resolver failures are dns failures', async () => {
  const client = makeClient({ allowPrivate: false, resolver: fakeResolver({}) });
  const result = await client.post('https://missing.test/', '{}', {});
  assert.equal(result.ok, false);
  assert.equal(result.failureCode, 'dns');
  assert.match(result.errorMessage ?? '', /ENOTFOUND/);
});
