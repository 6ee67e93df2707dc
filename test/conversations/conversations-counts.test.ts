import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { addChannel, addOperator, inbound, inboxTenant, monotonicClock } from '../helpers/inbox.js';

interface ListBody {
  conversations: Array<{ conversationId: string; unreadCount: number; needsReply: boolean }>;
  nextCursor?: string;
  hasMore: boolean;
  inboxCounts: { total: number; unread: number; needsReply: number };
  inboxCountsCapped?: true;
}

function qs(params: Record<string, string | number | undefined>): string {
  const entries = Object.entries(params).filter(([, v]) => v !== undefined);
  return entries.length === 0 ? '' : '?' + entries.map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`).join('&');
}

describe('inbox counts', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ clock: monotonicClock() });
  });
  after(() => app.close());

  const db = () => app.runtime.services.db;

  async function lister(key: string) {
    return async (query: Record<string, string | number | undefined> = {}): Promise<ListBody> => {
      const res = await app.api(key, 'GET', `/conversations${qs(query)}`);
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as ListBody;
    };
  }

  /** The counts of a filter, counted row by row in the conversations table. */
  async function counted(tenantId: string, filter: { channel?: string; owner?: string }) {
    const [row] = await db().query<{ total: number; unread: number; needs_reply: number }>(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE unread_count > 0)::int AS unread, count(*) FILTER (WHERE needs_reply)::int AS needs_reply
       FROM conversations WHERE tenant_id = $1 AND ($2::text IS NULL OR channel_kind = $2) AND ($3::text IS NULL OR owner_operator_id = $3)`,
      [tenantId, filter.channel ?? null, filter.owner ?? null],
    );
    return { total: row.total, unread: row.unread, needsReply: row.needs_reply };
  }

  test('unsearched counts stay equal to a row-by-row count through every kind of change, for every filter', async () => {
    const scopes = ['conversations:read', 'conversations:triage:write', 'conversations:reviews:write'];
    const { tenantId, key, channelId } = await inboxTenant(app, scopes);
    const instagram = await addChannel(app, tenantId, 'instagram');
    const webchat = await addChannel(app, tenantId, 'webchat');
    const ana = await addOperator(app, tenantId, 'Ana');
    const luis = await addOperator(app, tenantId, 'Luis');
    // Another tenant's inbox changes alongside and must never leak into these counts.
    const other = await inboxTenant(app, scopes);
    const list = await lister(key);

    const convs: string[] = [];
    const channels = [channelId, instagram, webchat];
    for (let i = 0; i < 12; i += 1) {
      const contact = i % 3 === 1 ? { handle: `guest.${i}` } : { name: `Guest ${i}`, phone: `+34 612 000 ${String(100 + i)}` };
      convs.push((await inbound(app, tenantId, channels[i % 3], contact, `hello ${i}`)).conversationId);
      await inbound(app, other.tenantId, other.channelId, { phone: `+1 415 555 0${String(100 + i)}` });
    }
    // A second message into an existing conversation: the conversation count stays, unread grows.
    await inbound(app, tenantId, channelId, { name: 'Guest 0', phone: '+34 612 000 100' }, 'again');

    const filters: Array<{ channel?: string; owner?: string }> = [{}, { channel: 'whatsapp' }, { channel: 'instagram' }, { channel: 'webchat' }, { owner: ana.operatorId }, { owner: luis.operatorId }, { owner: ana.operatorId, channel: 'instagram' }];
    const check = async (step: string) => {
      for (const filter of filters) {
        const expected = await counted(tenantId, filter);
        assert.deepEqual((await list({ ...filter })).inboxCounts, expected, `${step}: ${JSON.stringify(filter)}`);
      }
      // A group's count is the sum of its shards (migration 0037).
      const counters = await db().query(
        `SELECT channel_kind, owner_key, sum(total)::int AS total, sum(unread)::int AS unread, sum(needs_reply)::int AS needs_reply
         FROM inbox_counters WHERE tenant_id = $1 GROUP BY 1, 2 ORDER BY 1, 2`,
        [tenantId],
      );
      const grouped = await db().query(
        `SELECT channel_kind, coalesce(owner_operator_id, '') AS owner_key, count(*)::int AS total, count(*) FILTER (WHERE unread_count > 0)::int AS unread,
                count(*) FILTER (WHERE needs_reply)::int AS needs_reply
         FROM conversations WHERE tenant_id = $1 GROUP BY 1, 2 ORDER BY 1, 2`,
        [tenantId],
      );
      // Groups that emptied keep a row of zeros; every other row matches the table exactly.
      assert.deepEqual(counters.filter((row) => row.total !== 0), grouped, step);
    };

    await check('after inbound messages');
    assert.deepEqual((await list()).inboxCounts, { total: 12, unread: 12, needsReply: 12 });

    for (const [i, conversationId] of convs.entries()) {
      const owner = i % 4 === 0 ? ana.operatorId : i % 4 === 1 ? luis.operatorId : null;
      if (owner) await app.admin('PATCH', `/tenants/${tenantId}/conversations/${conversationId}`, { ownerOperatorId: owner });
    }
    await check('after owners were set');

    for (const conversationId of convs.slice(0, 5)) {
      assert.equal((await app.api(key, 'POST', `/conversations/${conversationId}/read`)).statusCode, 200);
    }
    // A second read changes nothing, nor does it move a counter.
    assert.equal((await app.api(key, 'POST', `/conversations/${convs[0]}/read`)).json().changed, false);
    await check('after reads');

    for (const conversationId of convs.slice(3, 9)) {
      assert.equal((await app.api(key, 'POST', `/conversations/${conversationId}/needs-reply/resolve`)).statusCode, 200);
    }
    await check('after needs-reply resolutions');

    // Changes that do not touch a counted field (reviews, handoffs, renames, owner moves) leave the counts right.
    assert.equal((await app.api(key, 'POST', `/conversations/${convs[1]}/review`, { reasonCode: 'other' })).statusCode, 200);
    await app.admin('POST', `/tenants/${tenantId}/conversations/${convs[2]}/handoff`, { action: 'open' });
    await inbound(app, tenantId, channelId, { name: 'Guest Zero Renamed', phone: '+34 612 000 100' }, 'new name');
    await app.admin('PATCH', `/tenants/${tenantId}/conversations/${convs[0]}`, { ownerOperatorId: luis.operatorId });
    await app.admin('PATCH', `/tenants/${tenantId}/conversations/${convs[4]}`, { ownerOperatorId: null });
    await check('after reviews, handoffs, a rename and owner moves');

    // A new message on a read and acknowledged conversation raises both flags again.
    await inbound(app, tenantId, instagram, { handle: 'guest.4' }, 'one more thing');
    await check('after a message on a handled conversation');

    // A hand-written fix, one statement over many conversations, keeps them too (the trigger counts each row).
    await db().query(`UPDATE conversations SET unread_count = 0, needs_reply = NOT needs_reply WHERE tenant_id = $1 AND channel_kind <> 'webchat'`, [tenantId]);
    await db().query(`UPDATE conversations SET owner_operator_id = $2 WHERE tenant_id = $1 AND owner_operator_id IS NULL`, [tenantId, ana.operatorId]);
    await check('after bulk updates by hand');
  });

  test('concurrent writes to one counter row all count (new conversations, reads and owner moves at once)', async () => {
    const { tenantId, key, channelId } = await inboxTenant(app, ['conversations:read', 'conversations:triage:write']);
    const ana = await addOperator(app, tenantId, 'Ana');
    const list = await lister(key);
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) => inbound(app, tenantId, channelId, { name: `Rush ${i}`, phone: `+34 655 ${String(100_000 + i)}` })),
    );
    assert.deepEqual((await list()).inboxCounts, { total: 30, unread: 30, needsReply: 30 });
    await Promise.all(
      created.map((c, i) =>
        i % 2 === 0
          ? app.api(key, 'POST', `/conversations/${c.conversationId}/read`)
          : app.admin('PATCH', `/tenants/${tenantId}/conversations/${c.conversationId}`, { ownerOperatorId: ana.operatorId }),
      ),
    );
    assert.deepEqual((await list()).inboxCounts, { total: 30, unread: 15, needsReply: 30 });
    assert.deepEqual((await list({ owner: ana.operatorId })).inboxCounts, { total: 15, unread: 15, needsReply: 15 });
    assert.deepEqual(await counted(tenantId, { owner: ana.operatorId }), { total: 15, unread: 15, needsReply: 15 });
  });

  test('a contact search counts at most 100 matches and says so; below that its counts are exact', async () => {
    const { tenantId, key, channelId } = await inboxTenant(app, ['conversations:read', 'conversations:triage:write']);
    const list = await lister(key);
    const ids: string[] = [];
    for (let i = 0; i < 103; i += 1) {
      ids.push((await inbound(app, tenantId, channelId, { name: `Quimby ${i}`, phone: `+34 699 ${String(100_000 + i)}` })).conversationId);
    }
    await inbound(app, tenantId, channelId, { name: 'Someone Else', phone: '+34 688 000 001' });
    // The three oldest matches are read and acknowledged: they fall outside the 100 most recent.
    for (const conversationId of ids.slice(0, 3)) {
      await app.api(key, 'POST', `/conversations/${conversationId}/read`);
      await app.api(key, 'POST', `/conversations/${conversationId}/needs-reply/resolve`);
    }
    // Two of the most recent ones too.
    for (const conversationId of ids.slice(101)) await app.api(key, 'POST', `/conversations/${conversationId}/read`);

    const capped = await list({ contactQuery: 'quimby' });
    assert.equal(capped.inboxCountsCapped, true);
    assert.deepEqual(capped.inboxCounts, { total: 100, unread: 98, needsReply: 100 }, 'the 100 most recently active matches');
    assert.equal(capped.conversations.length, 25);
    assert.equal(capped.hasMore, true);

    // Paging still reaches every match, and every page carries the same counts.
    const seen: string[] = [];
    let page = await list({ contactQuery: 'quimby', limit: 40 });
    for (;;) {
      seen.push(...page.conversations.map((c) => c.conversationId));
      assert.deepEqual(page.inboxCounts, { total: 100, unread: 98, needsReply: 100 });
      assert.equal(page.inboxCountsCapped, true);
      if (!page.nextCursor) break;
      page = await list({ contactQuery: 'quimby', limit: 40, cursor: page.nextCursor });
    }
    assert.deepEqual(seen, [...ids].reverse());

    // The unsearched inbox counts all 104 conversations exactly (from the counters).
    const inbox = await list();
    assert.deepEqual(inbox.inboxCounts, { total: 104, unread: 99, needsReply: 101 });
    assert.equal(inbox.inboxCountsCapped, undefined);

    // A narrower search is below the cap: exact counts and no flag.
    const narrow = await list({ contactQuery: 'quimby 10' });
    assert.deepEqual(narrow.inboxCounts, { total: 4, unread: 2, needsReply: 4 }, 'Quimby 10, 100, 101 and 102');
    assert.equal('inboxCountsCapped' in narrow, false);
    const phone = await list({ contactQuery: '+34 699 1001' });
    assert.deepEqual(phone.inboxCounts, { total: 3, unread: 1, needsReply: 3 }, '+3469910010x: 100, 101, 102');
    assert.equal('inboxCountsCapped' in phone, false);
  });

  test('a search with exactly 100 matches is exact, not capped', async () => {
    const { tenantId, key, channelId } = await inboxTenant(app, ['conversations:read']);
    const list = await lister(key);
    for (let i = 0; i < 100; i += 1) await inbound(app, tenantId, channelId, { name: `Ximena ${i}`, phone: `+34 677 ${String(100_000 + i)}` });
    const body = await list({ contactQuery: 'ximena', channel: 'whatsapp' });
    assert.deepEqual(body.inboxCounts, { total: 100, unread: 100, needsReply: 100 });
    assert.equal('inboxCountsCapped' in body, false);
    assert.equal((await list({ contactQuery: 'ximena', channel: 'instagram' })).inboxCounts.total, 0);
  });
});
