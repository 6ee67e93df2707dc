import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { keyLifetime, requestHash } from '../../src/platform/idempotency.js';
import { OutboundQueue } from '../../src/messaging/outbound.js';
import { outboundRepo, type ReplyClaim } from '../../src/messaging/outbound-repo.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { inbound, monotonicClock } from '../helpers/inbox.js';
import { errorOf, events, HOUR, phone, reply, world, written } from '../helpers/replies.js';

// Replies that arrive together are written together (one conversation_replies call per group), and each keeps the
// outcome it would have had alone: accepted, replayed, 409 on its key, or refused by the channel rules.

describe('through the API, with workers', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp({ startWorkers: true, clock: monotonicClock() });
  });
  after(() => app.close());

  test('replies that arrive together are written together, each with its own answer, and each is sent', async () => {
    const w = await world(app, 'whatsapp');
    const open = await inbound(app, w.tenantId, w.channelId, { phone: phone() });
    const other = await inbound(app, w.tenantId, w.channelId, { phone: phone() });
    const late = await app.admin<{ conversationId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, {
      channelId: w.channelId, contact: { phone: phone() }, text: 'old', receivedAt: new Date(Date.now() - 25 * HOUR).toISOString(),
    });
    const optedOut = await inbound(app, w.tenantId, w.channelId, { phone: phone() });
    await app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${optedOut.contactId}`, { optedOut: true });
    const before = await written(app, w.tenantId);

    // Sixteen at once: a group's replies are refused or accepted one by one, and a key used twice in it is a replay or a 409.
    const cases: Array<{ conversationId: string; text: string; key: string; status: number; reason?: string }> = [
      ...Array.from({ length: 6 }, (_, i) => ({ conversationId: i % 2 ? open.conversationId : other.conversationId, text: `hello ${i}`, key: `group-${i}`, status: 202 })),
      { conversationId: late.conversationId, text: 'late', key: 'group-late', status: 409, reason: 'outside_customer_service_window' },
      { conversationId: optedOut.conversationId, text: 'hi', key: 'group-out', status: 409, reason: 'recipient_opted_out' },
      { conversationId: open.conversationId, text: 'twice', key: 'group-twice', status: 202 },
      { conversationId: open.conversationId, text: 'twice', key: 'group-twice', status: 202 },
      { conversationId: other.conversationId, text: 'clash one', key: 'group-clash', status: 202 },
      { conversationId: other.conversationId, text: 'clash two', key: 'group-clash', status: 409 },
      ...Array.from({ length: 4 }, (_, i) => ({ conversationId: open.conversationId, text: `more ${i}`, key: `group-more-${i}`, status: 202 })),
    ];
    const results = await Promise.all(cases.map((c) => reply(app, w.key, c.conversationId, { text: c.text }, c.key)));
    // The first of a clashing pair is whichever was written first: compare the pair as a set.
    const statuses = results.map((res) => res.statusCode);
    assert.deepEqual([statuses[10], statuses[11]].sort(), [202, 409], results[10].body + results[11].body);
    for (const [i, c] of cases.entries()) {
      if (c.key === 'group-clash') continue;
      assert.equal(statuses[i], c.status, `${c.key}: ${results[i].body}`);
      if (c.reason) assert.equal(errorOf(results[i], 409, 'M2M_CONFLICT').reason, c.reason);
    }
    errorOf(results[statuses[10] === 409 ? 10 : 11], 409, 'M2M_IDEMPOTENCY_CONFLICT');
    assert.equal(results[8].json().messageId, results[9].json().messageId, 'the same key and body: one message');
    assert.equal([results[8], results[9]].filter((res) => res.headers['idempotent-replayed'] === 'true').length, 1);

    const accepted = new Set(results.filter((res) => res.statusCode === 202).map((res) => res.json().messageId as string));
    assert.equal(accepted.size, 12, 'six, four more, one of twice, one of the clash');
    const after = await written(app, w.tenantId);
    assert.equal(after.messages - before.messages, 12);
    assert.equal(after.requests - before.requests, 12);
    // Each accepted reply is sent by the workers (whose dispatch starts and acceptances are grouped too), and announced once.
    await eventually(async () => (await events(app, w.tenantId, 'message.delivery.updated')).filter((e) => e.status === 'sent').length === 12, 10_000, '12 sends');
    const created = (await events(app, w.tenantId, 'message.created')).filter((e) => e.direction === 'outbound');
    assert.deepEqual(new Set(created.map((e) => e.messageId)), accepted);
  });
});

// conversation_replies (src/messaging/sql/conversation_replies.sql) called directly with one group, no workers running: replies written set
// by set keep the outcomes of one reply at a time, whatever the group holds.
describe('the reply statement, called directly', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  const db = () => app.runtime.services.db;
  const outbound = new OutboundQueue(10);
  const wake = { jobs: 'test_jobs', webhooks: 'test_webhooks' };

  function claim(tenantId: string, channelId: string, conversationId: string, key: string, text: string, at: Date): ReplyClaim {
    const message = outbound.prepare(at, { tenantId, conversationId, channelId, channelKind: 'webchat', recipientPhone: null, text });
    return {
      message,
      operation: 'replyToConversation',
      key,
      requestHash: requestHash({ conversationId, text }),
      response: { conversationId, messageId: message.message_id },
      ...keyLifetime(at),
    };
  }

  test('one group: replies, a key used twice, an opted-out contact and a missing conversation each get their own outcome', async () => {
    const { tenantId } = await app.tenantWithKey(['conversations:write']);
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'webchat', name: 'Web' });
    const a = await inbound(app, tenantId, channelId, { handle: 'guest-a' });
    const b = await inbound(app, tenantId, channelId, { handle: 'guest-b' });
    const out = await inbound(app, tenantId, channelId, { handle: 'guest-out' });
    await app.admin('PATCH', `/tenants/${tenantId}/contacts/${out.contactId}`, { optedOut: true });

    const t0 = Date.now();
    const at = (ms: number) => new Date(t0 + ms);
    const group = [
      claim(tenantId, channelId, a.conversationId, 'k1', 'first to a', at(1)),
      claim(tenantId, channelId, a.conversationId, 'k2', 'second to a', at(2)),
      claim(tenantId, channelId, b.conversationId, 'k1', 'first to a', at(3)),
      claim(tenantId, channelId, b.conversationId, 'k2', 'not the same request', at(4)),
      claim(tenantId, channelId, out.conversationId, 'k5', 'to the opted out', at(5)),
      claim(tenantId, channelId, 'conv_missing', 'k6', 'to nobody', at(6)),
    ];
    // The third is the first's request under its key (the same hash), so it replays the first.
    group[2].requestHash = group[0].requestHash;

    const outcomes = await outboundRepo.replies(db(), group, wake);
    assert.deepEqual(outcomes.map((o) => o.outcome), ['queued', 'queued', 'taken', 'taken', 'refused', 'missing']);
    const [, , replay, clash, refused] = outcomes;
    assert.ok(replay.outcome === 'taken' && clash.outcome === 'taken' && refused.outcome === 'refused');
    assert.deepEqual({ ...replay.stored, response_body: JSON.parse(replay.stored.response_body) }, { request_hash: group[0].requestHash, response_status: 202, response_body: group[0].response });
    assert.equal(clash.stored.request_hash, group[1].requestHash, 'the key holds the first use, not this request');
    assert.equal(refused.refusal, 'recipient_opted_out');

    const written = (sql: string) => db().query<{ id: string }>(sql, [tenantId]);
    const sent = [group[0].message, group[1].message];
    assert.deepEqual((await written(`SELECT id FROM messages WHERE tenant_id = $1 AND direction = 'outbound' ORDER BY id`)).map((r) => r.id), sent.map((m) => m.message_id).sort());
    assert.deepEqual((await written(`SELECT id FROM message_requests WHERE tenant_id = $1 ORDER BY id`)).map((r) => r.id), sent.map((m) => m.request_id).sort());
    assert.deepEqual(
      (await written(`SELECT payload ->> 'requestEventId' AS id FROM jobs WHERE tenant_id = $1 AND task = 'messaging.send' ORDER BY 1`)).map((r) => r.id),
      sent.map((m) => m.request_id).sort(),
    );
    assert.deepEqual(
      (await written(`SELECT id FROM webhook_events WHERE tenant_id = $1 AND type = 'message.created' AND body LIKE '%"outbound"%' ORDER BY id`)).map((r) => r.id),
      sent.map((m) => m.event_id).sort(),
    );
    assert.deepEqual((await written(`SELECT key AS id FROM idempotency_keys WHERE tenant_id = $1 ORDER BY key`)).map((r) => r.id), ['k1', 'k2'], 'refusals and the missing leave their keys free');

    // Two replies to one conversation: its last activity is the later one.
    const [conversation] = await db().query<{ last_message_at: Date; last_message_preview: string }>(
      'SELECT last_message_at, last_message_preview FROM conversations WHERE id = $1',
      [a.conversationId],
    );
    assert.equal(conversation.last_message_at.toISOString(), at(2).toISOString());
    assert.equal(conversation.last_message_preview, 'second to a');

    // A later group: a key completed earlier is answered before anything is locked or written.
    const again = await outboundRepo.replies(db(), [group[0], claim(tenantId, channelId, b.conversationId, 'k7', 'to b', at(7))], wake);
    assert.deepEqual(again.map((o) => o.outcome), ['taken', 'queued']);
    assert.equal((await written(`SELECT id FROM message_requests WHERE tenant_id = $1`)).length, 3);
  });

  test('a refused reply stays refused when an earlier reply of its group takes the same key', async () => {
    const { tenantId } = await app.tenantWithKey(['conversations:write']);
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'webchat', name: 'Web' });
    const open = await inbound(app, tenantId, channelId, { handle: 'guest-open' });
    const out = await inbound(app, tenantId, channelId, { handle: 'guest-out' });
    await app.admin('PATCH', `/tenants/${tenantId}/contacts/${out.contactId}`, { optedOut: true });

    const t0 = Date.now();
    const group = [
      claim(tenantId, channelId, open.conversationId, 'shared', 'to the open one', new Date(t0 + 1)),
      claim(tenantId, channelId, out.conversationId, 'shared', 'to the opted out', new Date(t0 + 2)),
    ];
    // One at a time, the second would find the key taken (a 409); in a group the rules are checked before any key
    // is written, so it is refused as if it had come first.
    const outcomes = await outboundRepo.replies(db(), group, wake);
    assert.deepEqual(outcomes.map((o) => o.outcome), ['queued', 'refused']);
    const keys = await db().query<{ request_hash: string }>('SELECT request_hash FROM idempotency_keys WHERE tenant_id = $1', [tenantId]);
    assert.deepEqual(keys.map((k) => k.request_hash), [group[0].requestHash]);
  });
});
