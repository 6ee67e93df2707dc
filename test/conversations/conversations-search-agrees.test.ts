import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { addChannel, addOperator, inbound, inboxTenant, monotonicClock } from '../helpers/inbox.js';

/**
 * A contact search, checked against a row-by-row search of the table on an inbox past the first few hundred
 * conversations: fragments common among the newest conversations, rare ones, ones that only match old
 * conversations, phone prefixes, LIKE wildcards, with channel and owner filters, page by page with the counts
 * (capped at 100) and `inboxCountsCapped`. PostgreSQL picks a different plan for a common fragment (a walk of
 * the newest conversations) than for a rare one (the trigram index); the answers must not differ.
 */
describe('contact search agrees with a row-by-row search', () => {
  let app: TestApp;
  let tenantId: string;
  let key: string;
  let instagram: string;
  let ana: string;
  before(async () => {
    app = await startTestApp({ clock: monotonicClock() });
    const tenant = await inboxTenant(app, ['conversations:read']);
    ({ tenantId, key } = tenant);
    instagram = await addChannel(app, tenantId, 'instagram');
    ana = (await addOperator(app, tenantId, 'Ana')).operatorId;
    // Oldest: 20 Martas (only old matches: the newest 256 hold none), "9_9" (a LIKE wildcard) and "909".
    for (let i = 0; i < 20; i += 1) await inbound(app, tenantId, i % 2 ? instagram : tenant.channelId, { name: `Marta Ruiz ${i}`, phone: `+34 612 100 ${100 + i}` });
    await inbound(app, tenantId, tenant.channelId, { name: 'Zed 9_9', handle: 'zed.a' });
    await inbound(app, tenantId, tenant.channelId, { name: 'Zed 909', handle: 'zed.b' });
    // Newest: 270 guests, 14 of them on a 50%_off promotion; some owned by Ana.
    for (let i = 0; i < 270; i += 1) {
      const name = i % 20 === 0 ? `Promo 50%_off ${i}` : `Guest ${i}`;
      const contact = i % 3 === 0 ? { name, handle: `guest.${i}` } : { name, phone: `+52 55 ${String(10_000_000 + i)}` };
      const { conversationId } = await inbound(app, tenantId, i % 4 === 0 ? instagram : tenant.channelId, contact);
      if (i % 5 === 0) await app.admin('PATCH', `/tenants/${tenantId}/conversations/${conversationId}`, { ownerOperatorId: ana });
    }
    // Another tenant with the same names must never show up.
    const other = await inboxTenant(app, ['conversations:read']);
    for (let i = 0; i < 10; i += 1) await inbound(app, other.tenantId, other.channelId, { name: `Marta Guest 50%_off ${i}`, handle: `other.${i}` });
  });
  after(() => app.close());

  interface ListBody {
    conversations: Array<{ conversationId: string }>;
    nextCursor?: string;
    hasMore: boolean;
    inboxCounts: { total: number; unread: number; needsReply: number };
    inboxCountsCapped?: true;
  }

  async function list(query: Record<string, string>): Promise<ListBody> {
    const res = await app.api(key, 'GET', `/conversations?${new URLSearchParams(query).toString()}`);
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as ListBody;
  }

  /** Every conversation of the tenant whose search text contains one of `fragments` (or whose phone starts with `prefix`), newest first. */
  async function expected(match: { fragments?: string[]; prefix?: string }, filter: { channel?: string; owner?: string }) {
    const rows = await app.runtime.services.db.query<{ id: string; search_text: string; contact_phone: string | null; unread_count: number; needs_reply: boolean }>(
      `SELECT c.id, k.search_text, c.contact_phone, c.unread_count, c.needs_reply FROM conversations c JOIN contacts k ON k.id = c.contact_id
       WHERE c.tenant_id = $1 AND ($2::text IS NULL OR c.channel_kind = $2) AND ($3::text IS NULL OR c.owner_operator_id = $3)
       ORDER BY c.last_message_at DESC, c.id DESC`,
      [tenantId, filter.channel ?? null, filter.owner ?? null],
    );
    return rows.filter((r) => (match.prefix ? r.contact_phone?.startsWith(match.prefix) : match.fragments!.some((f) => r.search_text.includes(f))));
  }

  /** Pages through a search and checks every page and the counts against the row-by-row answer. */
  async function check(contactQuery: string, match: { fragments?: string[]; prefix?: string }, filter: { channel?: string; owner?: string } = {}) {
    const all = await expected(match, filter);
    const counted = all.slice(0, 100);
    const what = `${contactQuery} ${JSON.stringify(filter)}`;
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const body = await list({ contactQuery, limit: '40', ...filter, ...(cursor ? { cursor } : {}) });
      assert.deepEqual(body.inboxCounts, {
        total: counted.length,
        unread: counted.filter((r) => r.unread_count > 0).length,
        needsReply: counted.filter((r) => r.needs_reply).length,
      }, `${what}: counts`);
      assert.equal(body.inboxCountsCapped, all.length > 100 ? true : undefined, `${what}: capped`);
      seen.push(...body.conversations.map((c) => c.conversationId));
      cursor = body.nextCursor;
      assert.equal(body.hasMore, cursor !== undefined);
    } while (cursor);
    assert.deepEqual(seen, all.map((r) => r.id), `${what}: pages`);
    return all.length;
  }

  test('common, rare and only-old fragments, with every filter, page by page', async () => {
    assert.equal(await check('guest', { fragments: ['guest'] }), 256 + 5, 'a common fragment: 256 names, and the handles of 5 promotions');
    assert.equal(await check('marta', { fragments: ['marta'] }), 20, 'matches only older than the newest 256');
    assert.equal(await check('Guest 13', { fragments: ['guest 13'] }), 11);
    assert.equal(await check('nobody', { fragments: ['nobody'] }), 0);
    for (const filter of [{ channel: 'instagram' }, { owner: ana }, { channel: 'whatsapp', owner: ana }]) {
      await check('guest', { fragments: ['guest'] }, filter);
      await check('marta', { fragments: ['marta'] }, filter);
      await check('ruiz 1', { fragments: ['ruiz 1'] }, filter);
    }
  });

  test('LIKE wildcards are literal', async () => {
    assert.equal(await check('50%_off', { fragments: ['50%_off'] }), 14, '14 promotions among the newest');
    assert.equal(await check('9_9', { fragments: ['9_9'] }), 1, '"9_9" is not "909"');
    assert.equal(await check('%%', { fragments: ['%%'] }), 0);
    assert.equal(await check('__', { fragments: ['__'] }), 0);
  });

  test('phone digits and a leading-"+" prefix, common and rare', async () => {
    assert.equal(await check('5255', { fragments: ['5255'] }), 180);
    assert.equal(await check('+52 55', { prefix: '+5255' }), 180, 'a prefix most recent phones share');
    assert.equal(await check('+34 612 100 11', { prefix: '+3461210011' }), 10, 'only old phones');
    assert.equal(await check('+52 55 1000 0269', { prefix: '+525510000269' }), 1);
    assert.equal(await check('+52 55', { prefix: '+5255' }, { channel: 'instagram' }), 45);
  });
});
