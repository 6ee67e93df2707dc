import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../src/db/driver.js';
import { keyLifetime } from '../src/platform/idempotency.js';
import { OutboundQueue } from '../src/messaging/outbound.js';
import { outboundRepo, type ReplyClaim } from '../src/messaging/outbound-repo.js';
import { sharedDatabase } from './helpers/shared-db.js';

// Statements run with `cachedPlan` keep a generic plan per connection, and nothing re-plans it while a table
// grows but is never analysed (a server whose PostgreSQL runs without autovacuum, as this machine's does). A plan
// made while a table is empty, where a scan costs nothing, would scan it forever: the kept-plan connections turn
// sequential scans off, and JIT, which the disabled scans' cost would switch on (docs/decisions.md, "Kept plans
// never scan"). conversation_replies keeps its plans per connection too (plpgsql): its key lookups cannot be planned
// as a scan of the keys (migration 0027).

const url = process.env.DATABASE_URL;
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

type Plan = { Plan: { 'Node Type': string; 'Index Name'?: string } };
const planOf = async (sql: string) => (await db.query<{ 'QUERY PLAN': Plan[] }>(sql, undefined, { cachedPlan: true }))[0]['QUERY PLAN'][0].Plan;

test('a plan kept while a table was empty reads it by index once it has grown', { skip: url ? false : 'PostgreSQL only: PGlite keeps no plans' }, async () => {
  await db.query('ANALYZE message_requests');
  // One connection of the kept-plan pool serves these one after the other: PREPARE, then its plan, made now.
  await db.query('PREPARE probe(text) AS SELECT status FROM message_requests WHERE id = $1', undefined, { cachedPlan: true });
  const first = await planOf(`EXPLAIN (FORMAT JSON) EXECUTE probe('mrq_x')`);
  // The rows' parents first: message requests have their foreign keys (migration 0028).
  await db.transaction((tx) =>
    tx.exec(`INSERT INTO tenants (id, name, created_at, updated_at) VALUES ('ten_x', 'X', now(), now());
      INSERT INTO channels (id, tenant_id, kind, name, created_at, updated_at) VALUES ('chn_x', 'ten_x', 'webchat', 'Web', now(), now());
      INSERT INTO contacts (id, tenant_id, handle, created_at, updated_at) VALUES ('ctc_x', 'ten_x', 'guest', now(), now());
      INSERT INTO conversations (id, tenant_id, channel_id, channel_kind, contact_id, last_message_at, created_at, updated_at)
      VALUES ('cnv_x', 'ten_x', 'chn_x', 'webchat', 'ctc_x', now(), now(), now());
      INSERT INTO messages (id, tenant_id, conversation_id, direction, text, created_at)
      SELECT 'msg_' || i, 'ten_x', 'cnv_x', 'outbound', 'text', now() FROM generate_series(1, 5000) AS i`),
  );
  await db.query(
    `INSERT INTO message_requests (id, tenant_id, conversation_id, reply_id, channel_id, channel_kind, text, status, provider, created_at, updated_at)
     SELECT 'mrq_' || i, 'ten_x', 'cnv_x', 'msg_' || i, 'chn_x', 'webchat', 'text', 'sent', 'sandbox', now(), now() FROM generate_series(1, 5000) AS i`,
  );
  const grown = await planOf(`EXPLAIN (FORMAT JSON) EXECUTE probe('mrq_x')`);
  for (const plan of [first, grown]) {
    assert.equal(plan['Node Type'], 'Index Scan', JSON.stringify(plan));
    assert.equal(plan['Index Name'], 'message_requests_pkey');
  }
  assert.deepEqual(await db.query('SHOW jit', undefined, { cachedPlan: true }), [{ jit: 'off' }]);
  // The connections that plan per call keep the planner's defaults.
  assert.deepEqual(await db.query('SHOW enable_seqscan'), [{ enable_seqscan: 'on' }]);
});

test('the reply statement looks each Idempotency-Key up by key, even when planned on an analysed empty table', async () => {
  const outbound = new OutboundQueue('sandbox', 10);
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
