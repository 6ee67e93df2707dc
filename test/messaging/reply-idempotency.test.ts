import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../../src/db/driver.js';
import { keyLifetime } from '../../src/platform/idempotency.js';
import { OutboundQueue } from '../../src/messaging/outbound.js';
import { outboundRepo, type ReplyClaim } from '../../src/messaging/outbound-repo.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { inbound, monotonicClock } from '../helpers/inbox.js';
import { sharedDatabase } from '../helpers/shared-db.js';
import { errorOf, events, phone, reply, world, written } from '../helpers/replies.js';

// A reply's Idempotency-Key: the same key and body replay the first answer, another body under the key is 409,
// a reply arriving while its twin is written waits for it, and the key is looked up by its index.

describe('through the API', () => {
  let app: TestApp;
  let seq = 0;

  before(async () => {
    app = await startTestApp({ startWorkers: true, clock: monotonicClock() });
  });
  after(() => app.close());

  test('a sent reply is replayed under its key with the same 202, writing nothing; another body under the key is 409', async () => {
    const w = await world(app);
    const first = await inbound(app, w.tenantId, w.channelId, { name: 'Ana', phone: phone() }, 'Can I check in early?');
    const res = await reply(app, w.key, first.conversationId, { text: 'Yes, from 11:00.' }, 'evt_same');
    assert.equal(res.statusCode, 202, res.body);
    const accepted = res.json() as { requestEventId: string };
    // Replayed after it was sent and its status moved on, so nothing the workers write lands in between.
    await eventually(async () => (await app.api(w.key, 'GET', `/message-requests/${accepted.requestEventId}/status`)).json().status === 'sent', 10_000, 'sent');
    await app.admin('POST', `/tenants/${w.tenantId}/message-requests/${accepted.requestEventId}/provider-status`, { status: 'delivered' });

    // Replay: same key and body → the same 202, nothing new; another body under the key → 409.
    const before = await written(app, w.tenantId);
    const replay = await reply(app, w.key, first.conversationId, { text: 'Yes, from 11:00.' }, 'evt_same');
    assert.equal(replay.statusCode, 202);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.deepEqual(replay.json(), accepted);
    errorOf(await reply(app, w.key, first.conversationId, { text: 'Something else' }, 'evt_same'), 409, 'M2M_IDEMPOTENCY_CONFLICT');
    assert.deepEqual(await written(app, w.tenantId), before);
  });

  test('two identical replies at once give one send: the others wait for it and replay its answer', async () => {
    const w = await world(app, 'webchat');
    const first = await inbound(app, w.tenantId, w.channelId, { handle: `guest-${++seq}` });
    const results = await Promise.all(Array.from({ length: 4 }, () => reply(app, w.key, first.conversationId, { text: 'Hello!' }, 'race')));
    assert.deepEqual(results.map((res) => res.statusCode), [202, 202, 202, 202], results.map((res) => res.body).join('\n'));
    assert.equal(new Set(results.map((res) => res.json().messageId)).size, 1, 'one message id in every answer');
    assert.equal(results.filter((res) => res.headers['idempotent-replayed'] === 'true').length, 3);
    const { messages, requests } = await written(app, w.tenantId);
    assert.equal(messages, 2, 'the inbound and one reply');
    assert.equal(requests, 1);
    assert.equal((await events(app, w.tenantId, 'message.created')).length, 2, 'message.created of the inbound and of the one reply');
  });

  test('one Idempotency-Key on two different replies at once: one is sent, the other is 409', async () => {
    const w = await world(app, 'webchat');
    const first = await inbound(app, w.tenantId, w.channelId, { handle: `guest-${++seq}` });
    const results = await Promise.all([reply(app, w.key, first.conversationId, { text: 'One' }, 'clash'), reply(app, w.key, first.conversationId, { text: 'Two' }, 'clash')]);
    assert.deepEqual(results.map((res) => res.statusCode).sort(), [202, 409], results.map((res) => res.body).join('\n'));
    errorOf(results.find((res) => res.statusCode === 409) ?? results[0], 409, 'M2M_IDEMPOTENCY_CONFLICT');
    const { messages, requests } = await written(app, w.tenantId);
    assert.equal(messages, 2, 'the inbound and one reply');
    assert.equal(requests, 1);
  });
});

// The planner is left as the server configures it. The reply statement (conversation_replies) keeps its plans
// per connection (plpgsql): its Idempotency-Key lookups must stay lookups by key even when those plans were made
// while idempotency_keys was empty.
describe('the reply statement', () => {
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
});
