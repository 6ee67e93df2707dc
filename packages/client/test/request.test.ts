import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ApiConnectionError,
  ApiError,
  ApiTimeoutError,
  M2MClient,
  type ClientOptions,
  type FetchLike,
} from '../src/index.js';
import { parseRetryAfter } from '../src/request.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

type Handler = (req: Seen, res: http.ServerResponse, index: number) => void;

/** Starts a scripted server on 127.0.0.1; `handlers[i]` answers the i-th request (the last one repeats). */
async function withServer(handlers: Handler[], fn: (baseUrl: string, seen: Seen[]) => Promise<void>): Promise<void> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      const index = seen.push(entry) - 1;
      handlers[Math.min(index, handlers.length - 1)](entry, res, index);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await fn(`http://127.0.0.1:${port}/m2m/v1`, seen);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Handler {
  return (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': `req_${status}`, ...headers });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  };
}

const errorEnvelope = (code: string, message: string, details?: unknown) => ({ error: { code, message, details } });

const SUB = {
  subscriptionId: 'whsub_1',
  url: 'https://hooks.example.com/m2m',
  events: ['message.created'],
  active: true,
  ownerApiKeyId: 'key_1',
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};

function client(baseUrl: string, extra: Partial<ClientOptions> = {}): M2MClient {
  return new M2MClient({ apiKey: 'm2m_test_key', baseUrl, retryBaseDelayMs: 10, ...extra });
}

// ---------------------------------------------------------------- against a real local server

test('retries a 503, then succeeds, with the same Idempotency-Key on every attempt', async () => {
  await withServer(
    [json(503, errorEnvelope('M2M_INTERNAL_ERROR', 'try again')), json(200, { ...SUB, secret: 'whsec_new' })],
    async (baseUrl, seen) => {
      const m2m = client(baseUrl);
      const sub = await m2m.webhooks.rotateSecret({ subscriptionId: 'whsub_1' });
      assert.equal(sub.secret, 'whsec_new');
      assert.equal(seen.length, 2);
      for (const r of seen) {
        assert.equal(r.method, 'POST');
        assert.equal(r.url, '/m2m/v1/webhooks/whsub_1/rotate-secret');
        assert.equal(r.headers.authorization, 'Bearer m2m_test_key');
      }
      const key = seen[0].headers['idempotency-key'];
      assert.match(String(key), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.equal(seen[1].headers['idempotency-key'], key);
    },
  );
});

test('each call gets its own Idempotency-Key; an explicit key is sent as given', async () => {
  await withServer([json(200, { ok: true })], async (baseUrl, seen) => {
    const m2m = client(baseUrl);
    await m2m.request({ method: 'POST', path: '/conversations/start', body: { a: 1 }, idempotent: true });
    await m2m.request({ method: 'POST', path: '/conversations/start', body: { a: 1 }, idempotent: true });
    await m2m.request({ method: 'POST', path: '/conversations/start', body: { a: 1 }, idempotencyKey: 'reply-to-evt_1' });
    await m2m.request({ method: 'GET', path: '/webhooks', idempotent: true });
    assert.ok(seen[0].headers['idempotency-key']);
    assert.notEqual(seen[0].headers['idempotency-key'], seen[1].headers['idempotency-key']);
    assert.equal(seen[2].headers['idempotency-key'], 'reply-to-evt_1');
    assert.equal(seen[3].headers['idempotency-key'], undefined, 'no key on GET');
    assert.equal(seen[0].headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(seen[0].body), { a: 1 });
  });
});

test('gives up after maxRetries and surfaces the last error', async () => {
  await withServer([json(502, errorEnvelope('M2M_INTERNAL_ERROR', 'bad gateway'))], async (baseUrl, seen) => {
    await assert.rejects(client(baseUrl).webhooks.list(), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 502);
      return true;
    });
    assert.equal(seen.length, 3, '1 attempt + 2 retries by default');
  });
});

test('a POST that is not a create or a send (retry) is not retried after a 5xx', async () => {
  await withServer([json(500, errorEnvelope('M2M_INTERNAL_ERROR', 'boom')), json(200, { delivery: {} })], async (baseUrl, seen) => {
    await assert.rejects(
      client(baseUrl).webhooks.deliveries.retry({ subscriptionId: 's', deliveryId: 'd' }),
      (err: unknown) => err instanceof ApiError && err.status === 500,
    );
    assert.equal(seen.length, 1);
    assert.equal(seen[0].headers['idempotency-key'], undefined);
  });
});

test('a create is retried after a 5xx under one generated Idempotency-Key', async () => {
  await withServer([json(500, errorEnvelope('M2M_INTERNAL_ERROR', 'boom')), json(201, SUB)], async (baseUrl, seen) => {
    const sub = await client(baseUrl).webhooks.create({ url: SUB.url, events: ['message.created'] });
    assert.equal(sub.subscriptionId, SUB.subscriptionId);
    assert.equal(seen.length, 2);
    assert.ok(seen[0].headers['idempotency-key']);
    assert.equal(seen[1].headers['idempotency-key'], seen[0].headers['idempotency-key']);
  });
});

test('a 429 is retried even for a non-idempotent POST, honouring Retry-After', async () => {
  await withServer(
    [json(429, errorEnvelope('M2M_RATE_LIMITED', 'slow down'), { 'retry-after': '1' }), json(201, { ...SUB, secret: 'whsec_1' })],
    async (baseUrl, seen) => {
      const started = Date.now();
      const sub = await client(baseUrl).webhooks.create({ url: SUB.url, events: ['message.created'], description: 'd' });
      const elapsed = Date.now() - started;
      assert.equal(sub.secret, 'whsec_1');
      assert.equal(seen.length, 2);
      assert.ok(elapsed >= 950, `waited ${elapsed} ms, Retry-After asked for 1000 ms`);
      assert.deepEqual(JSON.parse(seen[1].body), { url: SUB.url, events: ['message.created'], description: 'd' });
    },
  );
});

test('a Retry-After longer than maxRetryAfterMs is not waited for', async () => {
  await withServer([json(429, errorEnvelope('M2M_RATE_LIMITED', 'slow down'), { 'retry-after': '120' })], async (baseUrl, seen) => {
    await assert.rejects(client(baseUrl).webhooks.list(), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.code, 'M2M_RATE_LIMITED');
      assert.equal(err.headers.get('retry-after'), '120');
      return true;
    });
    assert.equal(seen.length, 1);
  });
});

test('an error envelope becomes an ApiError with status, code, message, details and requestId', async () => {
  const details = { requiredScopes: ['webhooks:read'], missingScopes: ['webhooks:read'] };
  await withServer(
    [json(403, errorEnvelope('M2M_AUTH_INSUFFICIENT_SCOPE', 'The credential lacks the required scope', details), { 'x-request-id': 'req_abc123' })],
    async (baseUrl, seen) => {
      await assert.rejects(client(baseUrl).webhooks.get({ subscriptionId: 'whsub_1' }), (err: unknown) => {
        assert.ok(err instanceof ApiError);
        assert.ok(err instanceof Error);
        assert.equal(err.name, 'ApiError');
        assert.equal(err.status, 403);
        assert.equal(err.code, 'M2M_AUTH_INSUFFICIENT_SCOPE');
        assert.equal(err.message, 'The credential lacks the required scope');
        assert.deepEqual(err.details, details);
        assert.equal(err.requestId, 'req_abc123');
        return true;
      });
      assert.equal(seen.length, 1, '4xx is not retried');
    },
  );
});

test('a non-envelope error body still gives an ApiError', async () => {
  await withServer(
    [(_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html', 'x-request-id': 'req_html' });
      res.end('<h1>Not Found</h1>');
    }],
    async (baseUrl) => {
      await assert.rejects(client(baseUrl).webhooks.list(), (err: unknown) => {
        assert.ok(err instanceof ApiError);
        assert.equal(err.status, 404);
        assert.equal(err.code, 'M2M_CLIENT_UNEXPECTED_RESPONSE');
        assert.equal(err.requestId, 'req_html');
        assert.match(err.message, /Not Found/);
        return true;
      });
    },
  );
});

test('a redirect is not followed: it surfaces as an ApiError, without retry', async () => {
  await withServer(
    [(_req, res) => {
      res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' });
      res.end();
    }],
    async (baseUrl, seen) => {
      await assert.rejects(client(baseUrl).webhooks.list(), (err: unknown) => err instanceof ApiError && err.status === 302);
      assert.equal(seen.length, 1);
    },
  );
});

test('times out with a clear error', async () => {
  await withServer([() => { /* never answers */ }], async (baseUrl, seen) => {
    const started = Date.now();
    await assert.rejects(client(baseUrl, { timeoutMs: 150, maxRetries: 0 }).webhooks.list(), (err: unknown) => {
      assert.ok(err instanceof ApiTimeoutError, `expected ApiTimeoutError, got ${String(err)}`);
      assert.ok(err instanceof ApiConnectionError);
      assert.equal(err.timeoutMs, 150);
      assert.match(err.message, /timed out after 150 ms \(GET \/m2m\/v1\/webhooks\)/);
      return true;
    });
    assert.ok(Date.now() - started < 2000);
    assert.equal(seen.length, 1);
  });
});

test('a timeout of a GET is retried; a per-call timeout overrides the client one', async () => {
  await withServer([() => { /* hang */ }, json(200, { subscriptions: [SUB] })], async (baseUrl, seen) => {
    const list = await client(baseUrl).webhooks.list({}, { timeoutMs: 150 });
    assert.deepEqual(list, { subscriptions: [SUB] });
    assert.equal(seen.length, 2);
  });
});

test('a caller abort stops the call without retrying', async () => {
  await withServer([() => { /* hang */ }], async (baseUrl, seen) => {
    const controller = new AbortController();
    // Abort once the server holds the request (a fixed delay raced the request on a busy machine).
    void (async () => {
      while (seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      controller.abort(new Error('caller gave up'));
    })();
    await assert.rejects(client(baseUrl).webhooks.list({}, { signal: controller.signal }), /caller gave up/);
    await new Promise((resolve) => setTimeout(resolve, 150)); // a retry, if any, would arrive by now
    assert.equal(seen.length, 1);
  });
});

// ---------------------------------------------------------------- webhooks resource (paths, bodies, envelopes)

test('webhooks resource: paths, methods, encoding, bodies and envelopes', async () => {
  const delivery = { deliveryId: 'd/1', eventId: 'evt_1', subscriptionId: 'sub 1', status: 'failed', attempts: 7 };
  await withServer(
    [
      json(201, { ...SUB, secret: 'whsec_a' }), // create
      json(200, { subscriptions: [SUB] }), // list
      json(200, SUB), // get
      json(200, { ...SUB, active: false }), // update
      json(204, undefined), // delete
      json(200, { deliveries: [delivery], nextCursor: 'cur_2', hasMore: true }), // listDeliveries
      json(200, { delivery }), // getDelivery
      json(202, { delivery: { ...delivery, status: 'pending', attempts: 0 } }), // retryDelivery
    ],
    async (baseUrl, seen) => {
      const w = client(baseUrl).webhooks;
      assert.equal((await w.create({ url: SUB.url, events: ['message.created'] })).secret, 'whsec_a');
      assert.deepEqual(await w.list(), { subscriptions: [SUB] });
      assert.deepEqual(await w.get({ subscriptionId: 'sub 1' }), SUB);
      assert.equal((await w.update({ subscriptionId: 'sub 1', active: false })).active, false);
      assert.equal(await w.delete({ subscriptionId: 'sub 1' }), undefined);
      const page = await w.deliveries.list({ subscriptionId: 'sub 1', status: 'failed', limit: 10, cursor: 'a+b/c' });
      assert.equal(page.hasMore, true);
      assert.equal(page.nextCursor, 'cur_2');
      assert.deepEqual(await w.deliveries.get({ subscriptionId: 'sub 1', deliveryId: 'd/1' }), { delivery });
      assert.equal((await w.deliveries.retry({ subscriptionId: 'sub 1', deliveryId: 'd/1' })).delivery.status, 'pending');

      assert.deepEqual(
        seen.map((r) => `${r.method} ${r.url}`),
        [
          'POST /m2m/v1/webhooks',
          'GET /m2m/v1/webhooks',
          'GET /m2m/v1/webhooks/sub%201',
          'PATCH /m2m/v1/webhooks/sub%201',
          'DELETE /m2m/v1/webhooks/sub%201',
          'GET /m2m/v1/webhooks/sub%201/deliveries?status=failed&limit=10&cursor=a%2Bb%2Fc',
          'GET /m2m/v1/webhooks/sub%201/deliveries/d%2F1',
          'POST /m2m/v1/webhooks/sub%201/deliveries/d%2F1/retry',
        ],
      );
      assert.deepEqual(JSON.parse(seen[0].body), { url: SUB.url, events: ['message.created'] });
      assert.deepEqual(JSON.parse(seen[3].body), { active: false });
      assert.equal(seen[1].body, '');
      assert.ok(seen[0].headers['idempotency-key'], 'create carries an Idempotency-Key');
      assert.equal(seen[7].headers['idempotency-key'], undefined, 'retry is not a create: no key');
    },
  );
});

test('deliveries.iterate follows nextCursor', async () => {
  const d = (n: number) => ({ deliveryId: `d_${n}`, eventId: `e_${n}`, subscriptionId: 's', status: 'delivered', attempts: 1 });
  await withServer(
    [json(200, { deliveries: [d(3), d(2)], nextCursor: 'c1', hasMore: true }), json(200, { deliveries: [d(1)], hasMore: false })],
    async (baseUrl, seen) => {
      const ids: string[] = [];
      for await (const x of client(baseUrl).webhooks.deliveries.iterate({ subscriptionId: 's', limit: 2 })) ids.push(x.deliveryId);
      assert.deepEqual(ids, ['d_3', 'd_2', 'd_1']);
      assert.deepEqual(seen.map((r) => r.url), ['/m2m/v1/webhooks/s/deliveries?limit=2', '/m2m/v1/webhooks/s/deliveries?limit=2&cursor=c1']);
    },
  );
});

test('path segments that URL parsers would collapse are rejected before sending', async () => {
  let calls = 0;
  const fetch: FetchLike = async () => {
    calls++;
    return new Response('{}');
  };
  const w = new M2MClient({ apiKey: 'k', baseUrl: 'https://api.example.com/m2m/v1', fetch }).webhooks;
  for (const bad of ['', '.', '..']) {
    await assert.rejects(w.get({ subscriptionId: bad }), TypeError);
    await assert.rejects(w.deliveries.get({ subscriptionId: 's', deliveryId: bad }), TypeError);
  }
  assert.equal(calls, 0);
});

// ---------------------------------------------------------------- injected fetch

test('injected fetch: network errors are retried for reads', async () => {
  let calls = 0;
  const fetch: FetchLike = async (input, init) => {
    calls++;
    if (calls === 1) throw new TypeError('fetch failed', { cause: new Error('ECONNRESET') });
    assert.equal(String(input), 'https://api.example.com/m2m/v1/webhooks');
    assert.equal(new Headers(init?.headers).get('authorization'), 'Bearer k');
    return new Response(JSON.stringify({ subscriptions: [] }), { status: 200 });
  };
  const m2m = new M2MClient({ apiKey: 'k', baseUrl: 'https://api.example.com/m2m/v1/', fetch, retryBaseDelayMs: 1 });
  assert.deepEqual(await m2m.webhooks.list(), { subscriptions: [] });
  assert.equal(calls, 2);
});

test('injected fetch: a network error that never clears gives ApiConnectionError', async () => {
  let calls = 0;
  const fetch: FetchLike = async () => {
    calls++;
    throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
  };
  const m2m = new M2MClient({ apiKey: 'k', baseUrl: 'https://api.example.com/m2m/v1', fetch, retryBaseDelayMs: 1, maxRetries: 3 });
  await assert.rejects(m2m.webhooks.list(), (err: unknown) => {
    assert.ok(err instanceof ApiConnectionError);
    assert.ok(!(err instanceof ApiTimeoutError));
    assert.match(err.message, /ECONNREFUSED/);
    return true;
  });
  assert.equal(calls, 4);
});

test('configuration is validated', () => {
  assert.throws(() => new M2MClient({ apiKey: '', baseUrl: 'https://x/m2m/v1' }), /apiKey/);
  assert.throws(() => new M2MClient({ apiKey: 'k', baseUrl: 'https://x/api' }), /\/m2m\/v1/);
  assert.throws(() => new M2MClient({ apiKey: 'k', baseUrl: 'not a url' }), /valid URL/);
  assert.throws(() => new M2MClient({ apiKey: 'k', baseUrl: 'https://x/m2m/v1', maxRetries: -1 }), /maxRetries/);
  assert.throws(() => new M2MClient({ apiKey: 'k', baseUrl: 'https://x/m2m/v1', timeoutMs: 0 }), /timeoutMs/);
});

test('parseRetryAfter handles seconds and HTTP dates', () => {
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter('2'), 2000);
  assert.equal(parseRetryAfter('0'), 0);
  assert.equal(parseRetryAfter('soon'), undefined);
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:03 GMT', now), 3000);
  assert.equal(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', now), 0);
});
