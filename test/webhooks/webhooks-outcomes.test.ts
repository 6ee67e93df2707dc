import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { OutcomeWriter, type AttemptOutcome, type OutcomeDb } from '../../src/webhooks/outcome-writer.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { FULL_WEBHOOK_SCOPES, createSubscription, emitEvent } from '../fixtures/webhooks.js';

// The dispatcher's outcome writer on the real database: outcomes arriving together share one statement,
// each caller learns when its own outcome is committed, and the lease fence holds for every row of a batch.

let app: TestApp;
before(async () => {
  app = await startTestApp({ env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
});
after(() => app.close());

test('concurrent outcomes are written in few statements, each fenced by its lease, every attempt logged', async () => {
  const db = app.runtime.services.db;
  const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
  const { subscriptionId } = await createSubscription(app, key, { url: 'http://127.0.0.1:9/never', events: ['message.created'] });
  for (let i = 0; i < 30; i++) await emitEvent(app, tenantId, 'message.created', { messageId: `m${i}` });
  const rows = await db.query<{ id: string }>('SELECT id FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id', [subscriptionId]);
  assert.equal(rows.length, 30);
  const ids = rows.map((r) => r.id);
  // 29 leased by this worker; the last one was taken over by another worker (our lease expired).
  await db.query(`UPDATE webhook_deliveries SET locked_by = 'worker-a', locked_until = now() + interval '1 minute' WHERE id = ANY ($1::text[])`, [ids.slice(0, 29)]);
  await db.query(`UPDATE webhook_deliveries SET locked_by = 'worker-b', locked_until = now() + interval '1 minute' WHERE id = $1`, [ids[29]]);

  let statements = 0;
  const counting: OutcomeDb = {
    kind: db.kind,
    query: (sql, params) => (statements++, db.query(sql, params)),
    transaction: (fn) => (statements++, db.transaction(fn)),
  };
  const writer = new OutcomeWriter(counting, 'worker-a', { afterMs: 60_000, minFailures: 10 });
  const started = new Date(Date.now() - 50);
  const outcome = (id: string, i: number): AttemptOutcome => {
    const kind = i % 3;
    return {
      deliveryId: id,
      tenantId,
      subscriptionId,
      status: kind === 0 ? 'delivered' : kind === 1 ? 'pending' : 'failed',
      nextAttemptAt: kind === 1 ? new Date(Date.now() + 60_000) : null,
      httpStatus: kind === 0 ? 204 : kind === 1 ? 503 : null,
      failureCode: kind === 0 ? null : kind === 1 ? 'http_status' : 'timeout',
      finishedAt: new Date(),
      startedAt: started,
      durationMs: 12.6,
      error: kind === 2 ? 'no response within 10000 ms' : null,
    };
  };
  await Promise.all(ids.map((id, i) => writer.write(outcome(id, i))));
  assert.ok(statements <= 2, `30 outcomes took ${statements} statements`);

  const after = await db.query<{ id: string; status: string; attempts: number; http_status: number | null; failure_code: string | null; locked_by: string | null; delivered: boolean; completed: boolean }>(
    `SELECT id, status, attempts, http_status, failure_code, locked_by, delivered_at IS NOT NULL AS delivered, completed_at IS NOT NULL AS completed
     FROM webhook_deliveries WHERE id = ANY ($1::text[]) ORDER BY id`,
    [ids],
  );
  for (const [i, row] of after.slice(0, 29).entries()) {
    const kind = i % 3;
    assert.equal(row.attempts, 1);
    assert.equal(row.locked_by, null);
    assert.equal(row.status, ['delivered', 'pending', 'failed'][kind]);
    assert.equal(row.http_status, [204, 503, null][kind]);
    assert.equal(row.failure_code, [null, 'http_status', 'timeout'][kind]);
    assert.equal(row.delivered, kind === 0);
    assert.equal(row.completed, kind !== 1);
  }
  const fenced = after[29];
  assert.deepEqual([fenced.status, fenced.attempts, fenced.locked_by], ['pending', 0, 'worker-b'], 'another worker\'s lease is not overwritten');

  const attempts = await db.query<{ delivery_id: string; duration_ms: number; error: string | null }>(
    'SELECT delivery_id, duration_ms, error FROM webhook_attempts WHERE delivery_id = ANY ($1::text[]) ORDER BY delivery_id',
    [ids],
  );
  assert.equal(attempts.length, 30, 'every attempt made is logged, fenced or not');
  assert.equal(attempts[0].duration_ms, 13);
  assert.equal(attempts.filter((a) => a.error === 'no response within 10000 ms').length, 10);
});

test('a failed write rejects only the callers in that batch', async () => {
  let calls = 0;
  const failing: OutcomeDb = {
    kind: 'postgres',
    query: async () => {
      calls++;
      throw new Error('connection lost');
    },
    transaction: async () => {
      throw new Error('not used');
    },
  };
  const writer = new OutcomeWriter(failing, 'worker-a', { afterMs: 60_000, minFailures: 10 });
  const now = new Date();
  const base = { tenantId: 't', subscriptionId: 'whk_x', status: 'delivered' as const, nextAttemptAt: null, httpStatus: 200, failureCode: null, finishedAt: now, startedAt: now, durationMs: 1, error: null };
  const results = await Promise.allSettled([writer.write({ ...base, deliveryId: 'a' }), writer.write({ ...base, deliveryId: 'b' })]);
  assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected']);
  assert.equal(calls, 2, 'the first outcome alone, then the one that waited');
});
