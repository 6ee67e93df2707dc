import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import {
  WebhookVerificationError,
  signWebhook,
  verifyWebhook,
  verifyWebhookSignature,
  type WebhookEvent,
  type WebhookVerificationFailureReason,
} from '../src/index.js';
import { createReceiver } from '../examples/receiver.js';

interface VectorCase {
  secret: string;
  timestamp: number;
  body: string;
  signedContent: string;
  header: string;
}

// A copy of the shared contract's spec/webhook-signature-vectors.json, kept in the repository so that a clone
// alone runs its tests; refresh it when the contract's vectors change.
const vectorsUrl = new URL('./fixtures/webhook-signature-vectors.json', import.meta.url);

function loadVectors(): VectorCase[] {
  const file = fileURLToPath(vectorsUrl);
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as { cases?: VectorCase[] };
  if (!Array.isArray(parsed.cases) || parsed.cases.length === 0) throw new Error(`No cases in ${file}`);
  return parsed.cases;
}

const vectors = loadVectors();

const SECRET = 'whsec_unit_test_secret';
const NOW = 1_767_225_600;
const EVENT: WebhookEvent = {
  eventId: 'evt_123',
  type: 'message.created',
  schemaVersion: '1.0',
  tenantId: 't_1',
  occurredAt: '2026-01-01T00:00:00.000Z',
  data: { messageId: 'm_1', conversationId: 'c_1', direction: 'inbound', channel: 'whatsapp' },
};
const BODY = JSON.stringify(EVENT);
const at = (seconds: number) => ({ now: () => seconds });

function assertRejects(fn: () => unknown, reason: WebhookVerificationFailureReason): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof WebhookVerificationError, `expected WebhookVerificationError, got ${String(err)}`);
    assert.equal(err.reason, reason);
    return true;
  });
}

// ---------------------------------------------------------------- shared vectors

test('vectors file: present and complete', () => {
  assert.ok(vectors.length >= 3);
  for (const v of vectors) assert.equal(v.signedContent, `${v.timestamp}.${v.body}`);
});

for (const [i, v] of vectors.entries()) {
  test(`vector ${i + 1}: signWebhook produces the exact header and it verifies`, () => {
    assert.equal(signWebhook(v.secret, v.timestamp, v.body), v.header);
    assert.equal(signWebhook(v.secret, v.timestamp, Buffer.from(v.body, 'utf8')), v.header);
    assert.deepEqual(verifyWebhookSignature(v.body, v.header, v.secret, at(v.timestamp)), { timestamp: v.timestamp });
    assert.deepEqual(
      verifyWebhookSignature(new TextEncoder().encode(v.body), v.header, v.secret, at(v.timestamp)),
      { timestamp: v.timestamp },
    );
    if (v.body === '') {
      // Signature is fine, but an empty body is no event: rejected only after the signature check.
      assertRejects(() => verifyWebhook(v.body, v.header, v.secret, at(v.timestamp)), 'invalid_json');
    } else {
      assert.deepEqual(verifyWebhook(v.body, v.header, v.secret, at(v.timestamp)), JSON.parse(v.body));
    }
  });
}

test('vector 1: returns the typed envelope', () => {
  const v = vectors[0];
  const event = verifyWebhook(v.body, v.header, v.secret, at(v.timestamp));
  assert.equal(event.eventId, 'evt_1');
  assert.equal(event.type, 'message.created');
  assert.equal(event.schemaVersion, '1.0');
  assert.equal(event.tenantId, 't_1');
  assert.equal(event.occurredAt, '2026-01-01T00:00:00.000Z');
  assert.equal(event.data.messageId, 'm_1');
});

test('vector 2: non-ASCII body verifies as a string and as UTF-8 bytes', () => {
  const v = vectors[1];
  assert.ok([...v.body].some((ch) => ch.charCodeAt(0) > 0x7f), 'vector 2 should contain non-ASCII characters');
  const bytes = Buffer.from(v.body, 'utf8');
  assert.notEqual(bytes.length, v.body.length);
  const fromString = verifyWebhook(v.body, v.header, v.secret, at(v.timestamp)) as unknown as { a: string };
  const fromBytes = verifyWebhook(bytes, v.header, v.secret, at(v.timestamp)) as unknown as { a: string };
  assert.equal(fromString.a, 'ünïcødé ✓');
  assert.deepEqual(fromBytes, fromString);
  // A Uint8Array view into a larger buffer: only the viewed bytes are signed.
  const padded = Buffer.concat([Buffer.from('xx'), bytes, Buffer.from('yy')]);
  const view = new Uint8Array(padded.buffer, padded.byteOffset + 2, bytes.length);
  assert.deepEqual(verifyWebhook(view, v.header, v.secret, at(v.timestamp)), fromString);
  // Latin-1 bytes of the same text are different bytes: must not verify.
  assertRejects(() => verifyWebhook(Buffer.from(v.body, 'latin1'), v.header, v.secret, at(v.timestamp)), 'signature_mismatch');
});

test('raw bytes are signed exactly, with no lossy string round trip', () => {
  // Invalid UTF-8 (0xff) would become U+FFFD if decoded to a string and re-encoded.
  const raw = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
  const header = signWebhook(SECRET, NOW, raw);
  assert.deepEqual(verifyWebhookSignature(raw, header, SECRET, at(NOW)), { timestamp: NOW });
  assertRejects(() => verifyWebhookSignature(raw.toString('utf8'), header, SECRET, at(NOW)), 'signature_mismatch');
  // The signature is valid but the bytes are not UTF-8 JSON.
  assertRejects(() => verifyWebhook(raw, header, SECRET, at(NOW)), 'invalid_json');
});

// ---------------------------------------------------------------- rejections

test('accepts a fresh, correctly signed event', () => {
  const header = signWebhook(SECRET, NOW, BODY);
  assert.deepEqual(verifyWebhook(BODY, header, SECRET, at(NOW)), EVENT);
  assert.deepEqual(verifyWebhook(BODY, header, SECRET, at(NOW + 300)), EVENT, '300 s old is still inside');
  assert.deepEqual(verifyWebhook(BODY, header, SECRET, at(NOW - 300)), EVENT, '300 s ahead is still inside');
});

test('default clock and tolerance', () => {
  const now = Math.floor(Date.now() / 1000);
  assert.deepEqual(verifyWebhook(BODY, signWebhook(SECRET, now, BODY), SECRET), EVENT);
  assertRejects(() => verifyWebhook(BODY, signWebhook(SECRET, now - 400, BODY), SECRET), 'timestamp_out_of_tolerance');
});

test('rejects a tampered body', () => {
  const header = signWebhook(SECRET, NOW, BODY);
  const tampered = BODY.replace('evt_123', 'evt_124');
  assertRejects(() => verifyWebhook(tampered, header, SECRET, at(NOW)), 'signature_mismatch');
  assertRejects(() => verifyWebhook(`${BODY} `, header, SECRET, at(NOW)), 'signature_mismatch');
});

test('rejects a wrong secret', () => {
  const header = signWebhook('whsec_other', NOW, BODY);
  assertRejects(() => verifyWebhook(BODY, header, SECRET, at(NOW)), 'signature_mismatch');
});

test('rejects a timestamp changed after signing', () => {
  const header = signWebhook(SECRET, NOW, BODY).replace(`t=${NOW}`, `t=${NOW + 1}`);
  assertRejects(() => verifyWebhook(BODY, header, SECRET, at(NOW)), 'signature_mismatch');
});

test('rejects a timestamp 301 s in the past', () => {
  const header = signWebhook(SECRET, NOW - 301, BODY);
  assertRejects(() => verifyWebhook(BODY, header, SECRET, at(NOW)), 'timestamp_out_of_tolerance');
});

test('rejects a timestamp 301 s in the future', () => {
  const header = signWebhook(SECRET, NOW + 301, BODY);
  assertRejects(() => verifyWebhook(BODY, header, SECRET, at(NOW)), 'timestamp_out_of_tolerance');
});

test('custom tolerance', () => {
  const header = signWebhook(SECRET, NOW - 20, BODY);
  assertRejects(() => verifyWebhook(BODY, header, SECRET, { now: () => NOW, toleranceSeconds: 10 }), 'timestamp_out_of_tolerance');
  assert.deepEqual(verifyWebhook(BODY, header, SECRET, { now: () => NOW, toleranceSeconds: 30 }), EVENT);
});

test('rejects a missing header', () => {
  assertRejects(() => verifyWebhook(BODY, undefined, SECRET, at(NOW)), 'missing_header');
  assertRejects(() => verifyWebhook(BODY, '', SECRET, at(NOW)), 'missing_header');
  assertRejects(() => verifyWebhook(BODY, '   ', SECRET, at(NOW)), 'missing_header');
});

test('rejects garbage headers', () => {
  const sig = signWebhook(SECRET, NOW, BODY).split('v1=')[1];
  for (const header of [
    'garbage',
    'sha256=abc',
    `v1=${sig}`, // no timestamp
    `t=${NOW}`, // no signature
    `t=${NOW},v1=nothex`, // no well-formed signature
    `t=${NOW},v1=${sig.slice(0, 62)}`, // too short
    `t=abc,v1=${sig}`,
    `t=-5,v1=${sig}`,
    `t=${NOW},t=${NOW},v1=${sig}`, // two timestamps
    `t=${NOW},=x,v1=${sig}`,
  ]) {
    assertRejects(() => verifyWebhook(BODY, header, SECRET, at(NOW)), 'malformed_header');
  }
});

test('several v1 values (rotation): accepted when any one matches', () => {
  const good = signWebhook(SECRET, NOW, BODY).split('v1=')[1];
  const old = signWebhook('whsec_old', NOW, BODY).split('v1=')[1];
  assert.deepEqual(verifyWebhook(BODY, `t=${NOW},v1=${old},v1=${good}`, SECRET, at(NOW)), EVENT);
  assert.deepEqual(verifyWebhook(BODY, `t=${NOW},v1=${good},v1=${old}`, SECRET, at(NOW)), EVENT);
  assert.deepEqual(verifyWebhook(BODY, `t=${NOW}, v1=${good}, v0=whatever, v1=short`, SECRET, at(NOW)), EVENT);
  assertRejects(() => verifyWebhook(BODY, `t=${NOW},v1=${old},v1=${old}`, SECRET, at(NOW)), 'signature_mismatch');
});

test('uppercase hex is accepted (hex decoding, not string comparison)', () => {
  const header = signWebhook(SECRET, NOW, BODY);
  const [t, v1] = header.split(',');
  assert.deepEqual(verifyWebhook(BODY, `${t},${v1.toUpperCase().replace('V1=', 'v1=')}`, SECRET, at(NOW)), EVENT);
});

test('JSON is parsed only after the signature checks out', () => {
  const notJson = '{not json';
  // Unsigned garbage: the signature failure is reported, not the JSON failure.
  assertRejects(() => verifyWebhook(notJson, signWebhook('whsec_other', NOW, notJson), SECRET, at(NOW)), 'signature_mismatch');
  assertRejects(() => verifyWebhook(notJson, signWebhook(SECRET, NOW, notJson), SECRET, at(NOW)), 'invalid_json');
  assertRejects(() => verifyWebhook('[1,2]', signWebhook(SECRET, NOW, '[1,2]'), SECRET, at(NOW)), 'invalid_json');
  assertRejects(() => verifyWebhook('null', signWebhook(SECRET, NOW, 'null'), SECRET, at(NOW)), 'invalid_json');
});

test('programming errors are TypeErrors, not verification failures', () => {
  assert.throws(() => signWebhook('', NOW, BODY), TypeError);
  assert.throws(() => signWebhook(SECRET, 1.5, BODY), TypeError);
  assert.throws(() => verifyWebhook(BODY, signWebhook(SECRET, NOW, BODY), '', at(NOW)), TypeError);
});

// ---------------------------------------------------------------- Stripe interop

test('interop: our header verifies with stripe.webhooks.constructEvent', () => {
  const stripe = new Stripe('sk_test_dummy');
  const now = Math.floor(Date.now() / 1000);
  for (const body of [BODY, vectors[1].body]) {
    const header = signWebhook(SECRET, now, body);
    const event = stripe.webhooks.constructEvent(body, header, SECRET, 300);
    assert.deepEqual(event, JSON.parse(body));
    // the static helper agrees
    assert.equal(Stripe.webhooks.signature?.verifyHeader(body, header, SECRET, 300), true);
  }
  // and Stripe rejects what we would reject
  assert.throws(() => stripe.webhooks.constructEvent(BODY, signWebhook('whsec_other', now, BODY), SECRET, 300));
  // the shared vectors, with Stripe's clock pinned to the vector time (receivedAt is in ms)
  for (const v of vectors.filter((c) => c.body !== '')) {
    assert.deepEqual(
      stripe.webhooks.constructEvent(v.body, v.header, v.secret, 300, undefined, v.timestamp * 1000),
      JSON.parse(v.body),
    );
  }
});

test("interop: stripe's generateTestHeaderString verifies with verifyWebhook", () => {
  const stripe = new Stripe('sk_test_dummy');
  for (const [body, timestamp] of [
    [BODY, NOW],
    [vectors[1].body, vectors[1].timestamp],
  ] as const) {
    const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret: SECRET, timestamp });
    assert.equal(header, signWebhook(SECRET, timestamp, body));
    assert.deepEqual(verifyWebhook(body, header, SECRET, at(timestamp)), JSON.parse(body));
    assert.deepEqual(verifyWebhook(Buffer.from(body), header, SECRET, at(timestamp)), JSON.parse(body));
  }
  for (const v of vectors) {
    assert.equal(stripe.webhooks.generateTestHeaderString({ payload: v.body, secret: v.secret, timestamp: v.timestamp }), v.header);
  }
});

// ---------------------------------------------------------------- example receiver

async function withReceiver(
  onEvent: (e: WebhookEvent) => void | Promise<void>,
  fn: (url: string) => Promise<void>,
): Promise<void> {
  const server = createReceiver({ secret: SECRET, onEvent });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await fn(`http://127.0.0.1:${port}/webhooks`);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

function post(url: string, body: string, signature?: string): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-service-event-id': 'evt_123' };
  if (signature !== undefined) headers['x-service-signature'] = signature;
  return fetch(url, { method: 'POST', headers, body });
}

test('receiver: a signed event delivered twice → 2xx both times, onEvent once', async () => {
  const accepted: WebhookEvent[] = [];
  await withReceiver(
    (e) => {
      accepted.push(e);
    },
    async (url) => {
      const header = signWebhook(SECRET, Math.floor(Date.now() / 1000), BODY);
      const first = await post(url, BODY, header);
      assert.equal(first.status, 200);
      assert.deepEqual(await first.json(), { received: true, duplicate: false });
      const second = await post(url, BODY, header);
      assert.equal(second.status, 200);
      assert.deepEqual(await second.json(), { received: true, duplicate: true });
      assert.equal(accepted.length, 1);
      assert.deepEqual(accepted[0], EVENT);
    },
  );
});

test('receiver: concurrent duplicates run onEvent once', async () => {
  let calls = 0;
  await withReceiver(
    async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 50));
    },
    async (url) => {
      const header = signWebhook(SECRET, Math.floor(Date.now() / 1000), BODY);
      const responses = await Promise.all([post(url, BODY, header), post(url, BODY, header), post(url, BODY, header)]);
      for (const r of responses) {
        assert.equal(r.status, 200);
        await r.arrayBuffer();
      }
      assert.equal(calls, 1);
    },
  );
});

test('receiver: bad signature / missing header / stale timestamp → 400, onEvent not called', async () => {
  let calls = 0;
  await withReceiver(
    () => {
      calls++;
    },
    async (url) => {
      const now = Math.floor(Date.now() / 1000);
      const cases: [string | undefined, string][] = [
        [signWebhook('whsec_wrong', now, BODY), 'signature_mismatch'],
        [undefined, 'missing_header'],
        ['nonsense', 'malformed_header'],
        [signWebhook(SECRET, now - 3600, BODY), 'timestamp_out_of_tolerance'],
      ];
      for (const [header, reason] of cases) {
        const res = await post(url, BODY, header);
        assert.equal(res.status, 400, reason);
        assert.deepEqual(await res.json(), { error: reason });
      }
      assert.equal(calls, 0);
    },
  );
});

test('receiver: a failing durable store → 500 and the retry is accepted later', async () => {
  let attempts = 0;
  await withReceiver(
    () => {
      attempts++;
      if (attempts === 1) throw new Error('disk full');
    },
    async (url) => {
      const header = signWebhook(SECRET, Math.floor(Date.now() / 1000), BODY);
      const originalError = console.error;
      console.error = () => {};
      try {
        const first = await post(url, BODY, header);
        assert.equal(first.status, 500);
        await first.arrayBuffer();
      } finally {
        console.error = originalError;
      }
      const retry = await post(url, BODY, header);
      assert.equal(retry.status, 200);
      assert.deepEqual(await retry.json(), { received: true, duplicate: false });
      assert.equal(attempts, 2);
    },
  );
});

test('receiver: non-POST → 405', async () => {
  await withReceiver(
    () => {},
    async (url) => {
      const res = await fetch(url);
      assert.equal(res.status, 405);
      await res.arrayBuffer();
    },
  );
});
