import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../src/db/driver.js';
import { keyLifetime } from '../src/platform/idempotency.js';
import { OutboundQueue } from '../src/messaging/outbound.js';
import { outboundRepo, type ReplyClaim } from '../src/messaging/outbound-repo.js';
import { sharedDatabase } from './helpers/shared-db.js';

// The planner is left as the server configures it. The reply statement (conversation_replies) keeps its plans
// per connection (plpgsql): its Idempotency-Key lookups must stay lookups by key even when those plans were made
// while idempotency_keys was empty.

let database: Awaited<ReturnType<typeof sharedDatabase>>;
let db: Db;

before(async () => {
  database = await sharedDatabase();
  db = await database.open();
});
after(async () => {
  await db.close();
  await database.drop();
});

test('the reply statement looks each Idempotency-Key up by key, even when planned on an analysed empty table', async () => {
  const outbound = new OutboundQueue(10);
  const at = new Date();
  const claim = (key: string): ReplyClaim => ({
    message: outbound.prepare(at, { tenantId: 'ten_plans', conversationId: 'conv_missing', channelId: 'chn_x', channelKind: 'webchat', recipientPhone: null, text: 'Hi' }),
    operation: 'replyToConversation',
    key,
    requestHash: 'hash',
    response: {},
    ...keyLifetime(at),
  });
  const wake = { jobs: 'test_jobs', webhooks: 'test_webhooks' };
  // One transaction holds one connection, so the second call runs the plans the first made.
  const keysRead = await db.transaction(async (tx) => {
    await tx.query(`INSERT INTO tenants (id, name, created_at, updated_at) VALUES ('ten_plans', 'Plans', now(), now())`);
    await tx.query('ANALYZE idempotency_keys');
    assert.deepEqual((await outboundRepo.replies(tx, [claim('k0')], wake)).map((o) => o.outcome), ['missing']);
    await tx.query(
      `INSERT INTO idempotency_keys (tenant_id, operation, key, request_hash, response_status, response_body, created_at, expires_at)
       SELECT 'ten_plans', 'replyToConversation', 'key-' || i, 'hash', 202, '{}', now(), now() + interval '1 day'
       FROM generate_series(1, 2000) AS i`,
    );
    const before = await tx.query<{ n: number }>("SELECT pg_stat_get_xact_tuples_returned('idempotency_keys_pkey'::regclass)::int AS n");
    assert.deepEqual((await outboundRepo.replies(tx, [claim('k1'), claim('key-7')], wake)).map((o) => o.outcome), ['missing', 'taken']);
    const after = await tx.query<{ n: number }>("SELECT pg_stat_get_xact_tuples_returned('idempotency_keys_pkey'::regclass)::int AS n");
    return after[0].n - before[0].n;
  });
  assert.ok(keysRead <= 4, `the reply statement read ${keysRead} index entries of idempotency_keys for two replies`);
});

test("the database's connections keep the server's planner settings", async () => {
  // Nothing in the code tunes the planner per connection or per session (enable_*, jit, plan_cache_mode, …).
  const tuned = await db.query<{ name: string; source: string }>(
    `SELECT name, source FROM pg_settings WHERE category LIKE 'Query Tuning%' AND source IN ('client', 'session') ORDER BY name`,
  );
  assert.deepEqual(tuned, []);
});
