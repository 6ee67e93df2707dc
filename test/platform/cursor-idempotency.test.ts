import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ManualClock } from '../../src/clock.js';
import { DomainError } from '../../src/errors.js';
import { Cursors } from '../../src/platform/cursor.js';
import { runIdempotent, purgeExpiredIdempotencyKeys } from '../../src/platform/idempotency.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

describe('cursors', () => {
  const cursors = new Cursors(randomBytes(32));
  const filters = { tenantId: 't1', status: 'pending' };

  test('round trip, opaque and at most 400 characters', () => {
    const cursor = cursors.encode('deliveries', filters, { createdAt: '2026-01-01T00:00:00.000Z', id: 'dlv_1' });
    assert.ok(cursor.length <= 400);
    assert.deepEqual(cursors.decode('deliveries', { status: 'pending', tenantId: 't1' }, cursor), { createdAt: '2026-01-01T00:00:00.000Z', id: 'dlv_1' });
  });

  const rejects = (fn: () => unknown) =>
    assert.throws(fn, (error: unknown) => error instanceof DomainError && error.code === 'M2M_INVALID_CURSOR');

  test('tampered, constructed, foreign-list, other-filter and other-key cursors are M2M_INVALID_CURSOR', () => {
    const cursor = cursors.encode('deliveries', filters, { id: 'a' });
    const [payload, sig] = cursor.split('.');
    const forged = Buffer.from(JSON.stringify({ l: 'deliveries', f: 'x', p: { id: 'z' } })).toString('base64url');
    rejects(() => cursors.decode('deliveries', filters, `${forged}.${sig}`));
    // The first character carries six bits of the signature (the last one's low bits are padding).
    rejects(() => cursors.decode('deliveries', filters, `${payload}.${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`));
    rejects(() => cursors.decode('deliveries', filters, 'not-a-cursor'));
    rejects(() => cursors.decode('deliveries', filters, `${payload}.${sig}.extra`));
    rejects(() => cursors.decode('conversations', filters, cursor));
    rejects(() => cursors.decode('deliveries', { ...filters, status: 'failed' }, cursor));
    rejects(() => cursors.decode('deliveries', { ...filters, tenantId: 't2' }, cursor));
    rejects(() => new Cursors(randomBytes(32)).decode('deliveries', filters, cursor));
  });
});

describe('idempotency', () => {
  let app: TestApp;
  let tenantId: string;
  const clock = new ManualClock('2026-06-01T12:00:00Z');

  before(async () => {
    app = await startTestApp({ clock });
    tenantId = (await app.tenantWithKey([])).tenantId;
  });
  after(() => app.close());

  const counter = async () => (await app.runtime.services.db.query<{ count: number }>(`SELECT count(*)::int AS count FROM properties WHERE tenant_id = $1`, [tenantId]))[0].count;

  /** The idempotent operation under test: creates a property row and answers 202 with its id. */
  const run = (key: string, request: unknown, fail?: Error) =>
    runIdempotent(app.runtime.services.db, clock, { tenantId, operation: 'test.create', key, request }, async (tx) => {
      const id = `prop_${randomBytes(6).toString('hex')}`;
      await tx.query('INSERT INTO properties (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)', [id, tenantId, 'p', clock.now()]);
      if (fail) throw fail;
      return { status: 202, body: { id } };
    });

  test('same key and body replays the stored response; the work happens once', async () => {
    const before = await counter();
    const first = await run('key-1', { a: 1, b: [1, 2] });
    const second = await run('key-1', { b: [1, 2], a: 1 });
    assert.equal(first.replayed, false);
    assert.equal(second.replayed, true);
    assert.equal(second.status, 202);
    assert.deepEqual(second.body, first.body);
    assert.equal(await counter(), before + 1);
  });

  test('same key with a different body is M2M_IDEMPOTENCY_CONFLICT', async () => {
    await run('key-2', { a: 1 });
    await assert.rejects(run('key-2', { a: 2 }), (e: unknown) => e instanceof DomainError && e.code === 'M2M_IDEMPOTENCY_CONFLICT');
  });

  test('a retry while the first request is still running is M2M_IDEMPOTENCY_CONFLICT: the key is held by the running request itself, the work never runs twice, and nothing is stored before the answer', async () => {
    const keys = async () => (await app.runtime.services.db.query<{ count: number }>(`SELECT count(*)::int AS count FROM idempotency_keys WHERE key = 'key-6'`))[0].count;
    const before = await counter();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const first = runIdempotent(app.runtime.services.db, clock, { tenantId, operation: 'test.create', key: 'key-6', request: { a: 1 } }, async (tx) => {
      await tx.query('INSERT INTO properties (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)', [`prop_${randomBytes(6).toString('hex')}`, tenantId, 'p', clock.now()]);
      entered();
      await gate;
      return { status: 202, body: { first: true } };
    });
    await inside;
    try {
      if (process.env.DATABASE_URL) {
        // Another connection sees no committed claim (a crash now would leave nothing behind) and cannot take the key.
        assert.equal(await keys(), 0);
        await assert.rejects(run('key-6', { a: 1 }), (e: unknown) => e instanceof DomainError && e.code === 'M2M_IDEMPOTENCY_CONFLICT' && /still being processed/.test(e.message));
      } else {
        // PGlite runs one transaction at a time: the retry waits for the first and replays its answer.
        const retry = run('key-6', { a: 1 });
        release();
        assert.deepEqual(await retry, { status: 202, body: { first: true }, replayed: true });
      }
    } finally {
      release();
    }
    assert.equal((await first).replayed, false);
    assert.equal(await counter(), before + 1);
    assert.equal(await keys(), 1);
  });

  test('a failed request stores nothing: its state change rolls back and the key can be used again', async () => {
    const before = await counter();
    await assert.rejects(run('key-4', { a: 1 }, new DomainError('M2M_CONFLICT', 'nope')));
    assert.equal(await counter(), before);
    const retried = await run('key-4', { a: 1 });
    assert.equal(retried.replayed, false);
    assert.equal(await counter(), before + 1);
  });

  test('keys are scoped per tenant', async () => {
    const other = (await app.tenantWithKey([])).tenantId;
    await run('shared-key', { a: 1 });
    const theirs = await runIdempotent(app.runtime.services.db, clock, { tenantId: other, operation: 'test.create', key: 'shared-key', request: { a: 2 } }, async () => ({
      status: 202,
      body: { theirs: true },
    }));
    assert.equal(theirs.replayed, false);
  });

  test('after 24 hours a key is forgotten and purged', async () => {
    const first = await run('key-5', { a: 1 });
    clock.advance(24 * 60 * 60 * 1000 + 1000);
    const later = await run('key-5', { a: 99 });
    assert.equal(later.replayed, false);
    assert.notDeepEqual(later.body, first.body);
    clock.advance(24 * 60 * 60 * 1000 + 1000);
    const purged = await purgeExpiredIdempotencyKeys(app.runtime.services.db, clock.now());
    assert.ok(purged >= 1);
  });
});
