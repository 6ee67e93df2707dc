import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { UNKNOWN_OPERATOR, addChannel, addOperator, inbound, inboxTenant, monotonicClock, type Inbound } from '../helpers/inbox.js';

interface Item {
  conversationId: string;
  channel: string;
  channelId: string;
  contact: { contactId: string; name?: string; phone?: string };
  ownerOperatorId: string | null;
  unreadCount: number;
  needsReply: boolean;
  lastMessageAt: string;
  lastMessagePreview?: string;
  openReview: boolean;
  openHandoff: boolean;
  createdAt: string;
}

interface ListBody {
  conversations: Item[];
  nextCursor?: string;
  hasMore: boolean;
  inboxCounts: { total: number; unread: number; needsReply: number };
}

const ITEM_FIELDS = [
  'channel',
  'channelId',
  'contact',
  'conversationId',
  'createdAt',
  'lastMessageAt',
  'lastMessagePreview',
  'needsReply',
  'openHandoff',
  'openReview',
  'ownerOperatorId',
  'unreadCount',
];

function qs(params: Record<string, string | number>): string {
  return '?' + Object.entries(params).map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`).join('&');
}

describe('GET /conversations', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ clock: monotonicClock() });
  });
  after(() => app.close());

  /** One tenant whose inbox has four conversations over two channels, oldest first in `all`. */
  async function world() {
    const tenant = await inboxTenant(app, ['conversations:read', 'conversations:triage:write']);
    const { tenantId, channelId } = tenant;
    const instagram = await addChannel(app, tenantId, 'instagram');
    const maria = await inbound(app, tenantId, channelId, { name: 'María López', phone: '+52 55 1234 5678' }, 'Hola');
    const john = await inbound(app, tenantId, channelId, { name: 'John Smith', phone: '+1 415 555 0123' }, 'Late check-in?');
    const joe = await inbound(app, tenantId, instagram, { name: 'Joe', handle: 'Surfer.Joe' }, 'Board storage?');
    const mariaIg = await inbound(app, tenantId, instagram, { phone: '+525512345678' }, 'Same guest, other channel');
    const list = async (query: Record<string, string | number> = {}): Promise<ListBody> => {
      const res = await app.api(tenant.key, 'GET', `/conversations${Object.keys(query).length ? qs(query) : ''}`);
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as ListBody;
    };
    return { ...tenant, instagram, maria, john, joe, mariaIg, all: [maria, john, joe, mariaIg], list };
  }

  const ids = (body: ListBody) => body.conversations.map((c) => c.conversationId);
  const idsOf = (...messages: Inbound[]) => messages.map((m) => m.conversationId);

  test('newest activity first, with exactly the documented item fields', async () => {
    const w = await world();
    let body = await w.list();
    assert.deepEqual(Object.keys(body).sort(), ['conversations', 'hasMore', 'inboxCounts']);
    assert.deepEqual(ids(body), idsOf(w.mariaIg, w.joe, w.john, w.maria));
    assert.equal(body.hasMore, false);
    assert.deepEqual(body.inboxCounts, { total: 4, unread: 4, needsReply: 4 });

    const item = body.conversations.find((c) => c.conversationId === w.maria.conversationId)!;
    assert.deepEqual(Object.keys(item).sort(), ITEM_FIELDS);
    assert.deepEqual(item, {
      conversationId: w.maria.conversationId,
      channel: 'whatsapp',
      channelId: w.channelId,
      contact: { contactId: w.maria.contactId, name: 'María López', phone: '+525512345678' },
      ownerOperatorId: null,
      unreadCount: 1,
      needsReply: true,
      lastMessageAt: item.lastMessageAt,
      lastMessagePreview: 'Hola',
      openReview: false,
      openHandoff: false,
      createdAt: item.createdAt,
    });
    assert.equal(item.lastMessageAt, item.createdAt, 'one message: last activity is creation');
    assert.equal(new Date(item.createdAt).toISOString(), item.createdAt);

    // A new message moves the oldest conversation to the top.
    await inbound(app, w.tenantId, w.channelId, { phone: '+525512345678' }, 'Are you there?');
    body = await w.list();
    assert.deepEqual(ids(body), idsOf(w.maria, w.mariaIg, w.joe, w.john));
    const top = body.conversations[0];
    assert.equal(top.lastMessagePreview, 'Are you there?');
    assert.equal(top.unreadCount, 2);
    assert.ok(top.lastMessageAt > top.createdAt);
  });

  test('contactQuery matches name (case-insensitively), phone digits and handle', async () => {
    const w = await world();
    const found = async (contactQuery: string) => ids(await w.list({ contactQuery })).sort();
    const marias = idsOf(w.maria, w.mariaIg).sort();

    assert.deepEqual(await found('lóp'), marias);
    assert.deepEqual(await found('LÓP'), marias);
    assert.deepEqual(await found('María López'), marias);
    assert.deepEqual(await found('smi'), idsOf(w.john));
    assert.deepEqual(await found('SMITH'), idsOf(w.john));
    assert.deepEqual(await found('5512'), marias);
    assert.deepEqual(await found('+52 55 12'), marias, 'a formatted phone fragment matches its digits');
    assert.deepEqual(await found('(415) 555-01'), idsOf(w.john));
    assert.deepEqual(await found('surfer'), idsOf(w.joe));
    assert.deepEqual(await found('SURFER.JOE'), idsOf(w.joe));
    assert.deepEqual(await found('nobody here'), []);
    assert.deepEqual(await found('%%'), [], 'LIKE wildcards are literal');
    assert.deepEqual(await found('__'), [], 'LIKE wildcards are literal');

    const body = await w.list({ contactQuery: 'lóp' });
    assert.deepEqual(body.inboxCounts, { total: 2, unread: 2, needsReply: 2 });
  });

  test('a number typed with its leading + matches the phones that start with it; without, its digits anywhere', async () => {
    const w = await world();
    const us = await inbound(app, w.tenantId, w.channelId, { name: 'Pat', phone: '+1 525 512 3456' }, 'Hi');
    const found = async (contactQuery: string) => ids(await w.list({ contactQuery })).sort();
    assert.deepEqual(await found('+52 55 12'), idsOf(w.maria, w.mariaIg).sort(), '+1 525 512… contains 525512 but does not start with +52');
    assert.deepEqual(await found('+1 525'), idsOf(us));
    assert.deepEqual(await found('525512'), idsOf(w.maria, w.mariaIg, us).sort());
    assert.deepEqual((await w.list({ contactQuery: '+52 55 12' })).inboxCounts, { total: 2, unread: 2, needsReply: 2 });
  });

  test('renaming a contact renames it in the list and in search, on every channel', async () => {
    const w = await world();
    await app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${w.maria.contactId}`, { name: 'Maria Vega' });
    const body = await w.list({ contactQuery: 'vega' });
    assert.deepEqual(ids(body).sort(), idsOf(w.maria, w.mariaIg).sort());
    for (const item of body.conversations) assert.deepEqual(item.contact, { contactId: w.maria.contactId, name: 'Maria Vega', phone: '+525512345678' });
    assert.deepEqual(ids(await w.list({ contactQuery: 'lóp' })), [], 'the old name no longer matches');

    await app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${w.maria.contactId}`, { name: null });
    const item = (await w.list({ contactQuery: '5512' })).conversations.find((c) => c.conversationId === w.maria.conversationId)!;
    assert.deepEqual(item.contact, { contactId: w.maria.contactId, phone: '+525512345678' }, 'a cleared name is absent');
  });

  test('channel filter; inbox counts follow it', async () => {
    const w = await world();
    const instagram = await w.list({ channel: 'instagram' });
    assert.deepEqual(ids(instagram), idsOf(w.mariaIg, w.joe));
    assert.ok(instagram.conversations.every((c) => c.channel === 'instagram' && c.channelId === w.instagram));
    assert.deepEqual(instagram.inboxCounts, { total: 2, unread: 2, needsReply: 2 });
    assert.deepEqual(ids(await w.list({ channel: 'whatsapp' })), idsOf(w.john, w.maria));
    assert.deepEqual(ids(await w.list({ channel: 'all' })), ids(await w.list()));
    const none = await w.list({ channel: 'webchat' });
    assert.deepEqual(none, { conversations: [], hasMore: false, inboxCounts: { total: 0, unread: 0, needsReply: 0 } });
    assert.deepEqual(ids(await w.list({ channel: 'instagram', contactQuery: '5512' })), idsOf(w.mariaIg));
  });

  test('owner filter; unread and needsReply counts are counted separately and follow the filters', async () => {
    const w = await world();
    const ana = await addOperator(app, w.tenantId, 'Ana');
    const patched = await app.admin<Item>('PATCH', `/tenants/${w.tenantId}/conversations/${w.john.conversationId}`, { ownerOperatorId: ana.operatorId });
    assert.equal(patched.ownerOperatorId, ana.operatorId);
    await app.admin('PATCH', `/tenants/${w.tenantId}/conversations/${w.joe.conversationId}`, { ownerOperatorId: ana.operatorId });

    let mine = await w.list({ owner: ana.operatorId });
    assert.deepEqual(ids(mine), idsOf(w.joe, w.john));
    assert.ok(mine.conversations.every((c) => c.ownerOperatorId === ana.operatorId));
    assert.deepEqual(mine.inboxCounts, { total: 2, unread: 2, needsReply: 2 });
    assert.equal((await w.list({ owner: 'all' })).conversations.length, 4);

    // Reading one and acknowledging the other changes different counters.
    assert.equal((await app.api(w.key, 'POST', `/conversations/${w.john.conversationId}/read`)).statusCode, 200);
    assert.equal((await app.api(w.key, 'POST', `/conversations/${w.joe.conversationId}/needs-reply/resolve`)).statusCode, 200);
    mine = await w.list({ owner: ana.operatorId });
    assert.deepEqual(mine.inboxCounts, { total: 2, unread: 1, needsReply: 1 });
    assert.deepEqual((await w.list()).inboxCounts, { total: 4, unread: 3, needsReply: 3 });
    assert.deepEqual((await w.list({ owner: ana.operatorId, channel: 'instagram' })).inboxCounts, { total: 1, unread: 1, needsReply: 0 });

    // Clearing the owner takes the conversation out of the filter.
    const cleared = await app.admin<Item>('PATCH', `/tenants/${w.tenantId}/conversations/${w.joe.conversationId}`, { ownerOperatorId: null });
    assert.equal(cleared.ownerOperatorId, null);
    assert.deepEqual(ids(await w.list({ owner: ana.operatorId })), idsOf(w.john));
    // The admin route refuses an owner that is not an active operator of the tenant.
    const bad = await app.adminRaw('PATCH', `/tenants/${w.tenantId}/conversations/${w.joe.conversationId}`, { ownerOperatorId: UNKNOWN_OPERATOR });
    assert.equal(bad.statusCode, 404);
  });

  test('paging: limit=2 over five conversations sees each once, in order; a cursor is bound to its filters', async () => {
    const tenant = await inboxTenant(app, ['conversations:read']);
    for (let i = 0; i < 5; i += 1) await inbound(app, tenant.tenantId, tenant.channelId, { name: `Guest ${i}`, phone: `+1415555010${i}` });
    const get = async (query: string) => {
      const res = await app.api(tenant.key, 'GET', `/conversations${query}`);
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as ListBody;
    };
    const everything = ids(await get(''));
    assert.equal(everything.length, 5);

    const seen: string[] = [];
    const hasMore: boolean[] = [];
    let cursor: string | undefined;
    let first: ListBody | undefined;
    do {
      const page = await get(qs({ limit: 2, ...(cursor ? { cursor } : {}) }));
      first ??= page;
      assert.ok(page.conversations.length <= 2);
      assert.deepEqual(page.inboxCounts, { total: 5, unread: 5, needsReply: 5 }, 'counts cover the whole filter, not the page');
      seen.push(...ids(page));
      hasMore.push(page.hasMore);
      assert.equal(page.nextCursor !== undefined, page.hasMore);
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(hasMore, [true, true, false]);
    assert.deepEqual(seen, everything);

    const next = first!.nextCursor!;
    assert.ok(next.length <= 400);
    for (const query of [{ contactQuery: 'guest' }, { channel: 'whatsapp' }] as Array<Record<string, string>>) {
      const res = await app.api(tenant.key, 'GET', `/conversations${qs({ limit: 2, cursor: next, ...query })}`);
      assert.equal(res.statusCode, 400, JSON.stringify(query));
      assert.equal(res.json().error.code, 'M2M_INVALID_CURSOR');
    }
    // A different limit is not a different filter.
    assert.equal((await app.api(tenant.key, 'GET', `/conversations${qs({ limit: 3, cursor: next })}`)).statusCode, 200);
    // Another tenant cannot use the cursor, and a tampered one is refused.
    const other = await inboxTenant(app, ['conversations:read']);
    const foreign = await app.api(other.key, 'GET', `/conversations${qs({ limit: 2, cursor: next })}`);
    assert.equal(foreign.statusCode, 400);
    assert.equal(foreign.json().error.code, 'M2M_INVALID_CURSOR');
    const tampered = await app.api(tenant.key, 'GET', `/conversations${qs({ limit: 2, cursor: `x${next.slice(1)}` })}`);
    assert.equal(tampered.statusCode, 400);
    assert.equal(tampered.json().error.code, 'M2M_INVALID_CURSOR');
  });

  test('the same contactQuery keeps its cursor valid', async () => {
    const tenant = await inboxTenant(app, ['conversations:read']);
    for (let i = 0; i < 3; i += 1) await inbound(app, tenant.tenantId, tenant.channelId, { name: `Walker ${i}`, phone: `+1415555020${i}` });
    await inbound(app, tenant.tenantId, tenant.channelId, { name: 'Someone Else', phone: '+14155550300' });
    const page1 = (await app.api(tenant.key, 'GET', `/conversations${qs({ contactQuery: 'walker', limit: 2 })}`)).json() as ListBody;
    assert.equal(page1.hasMore, true);
    assert.deepEqual(page1.inboxCounts.total, 3);
    const page2 = await app.api(tenant.key, 'GET', `/conversations${qs({ contactQuery: 'walker', limit: 2, cursor: page1.nextCursor! })}`);
    assert.equal(page2.statusCode, 200);
    assert.equal(page2.json().conversations.length, 1);
    assert.equal(page2.json().hasMore, false);
    assert.equal(page2.json().nextCursor, undefined);
  });

  test('limit defaults to 25 and may not exceed 100', async () => {
    const tenant = await inboxTenant(app, ['conversations:read']);
    for (let i = 0; i < 26; i += 1) await inbound(app, tenant.tenantId, tenant.channelId, { handle: `guest_${i}` });
    const byDefault = await app.api(tenant.key, 'GET', '/conversations');
    assert.equal(byDefault.json().conversations.length, 25);
    assert.equal(byDefault.json().hasMore, true);
    assert.equal(byDefault.json().inboxCounts.total, 26);
    const hundred = await app.api(tenant.key, 'GET', '/conversations?limit=100');
    assert.equal(hundred.json().conversations.length, 26);
    assert.equal(hundred.json().hasMore, false);
    for (const limit of ['101', '0', '-1', 'abc', '2.5']) {
      const res = await app.api(tenant.key, 'GET', `/conversations?limit=${limit}`);
      assert.equal(res.statusCode, 400, limit);
      assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST');
    }
  });

  test('invalid filters are 400 M2M_INVALID_REQUEST', async () => {
    const { key } = await inboxTenant(app, ['conversations:read']);
    const cases = ['contactQuery=a', 'contactQuery=', `contactQuery=${'a'.repeat(201)}`, 'channel=telegram', 'owner=mine', 'owner=abc', `owner=${'A'.repeat(24)}`, `owner=${'a'.repeat(25)}`, 'colour=red'];
    for (const query of cases) {
      const res = await app.api(key, 'GET', `/conversations?${query}`);
      assert.equal(res.statusCode, 400, query);
      assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST', query);
    }
    assert.equal((await app.api(key, 'GET', `/conversations?contactQuery=${'a'.repeat(200)}`)).statusCode, 200);
    assert.equal((await app.api(key, 'GET', '/conversations?contactQuery=ab')).statusCode, 200);
    const mine = await app.api(key, 'GET', '/conversations?owner=mine');
    assert.ok(mine.json().error.details.issues.some((i: { path: string }) => i.path === 'query.owner'));
  });

  test('owner must be an active operator of this tenant: unknown, foreign or inactive is 404', async () => {
    const w = await world();
    const other = await inboxTenant(app, ['conversations:read']);
    const foreign = await addOperator(app, other.tenantId, 'Foreigner');
    const sleeper = await addOperator(app, w.tenantId, 'Sleeper');
    assert.equal((await w.list({ owner: sleeper.operatorId })).conversations.length, 0, 'active: 200 even with no conversations');
    await app.admin('PATCH', `/tenants/${w.tenantId}/operators/${sleeper.operatorId}`, { active: false });

    for (const owner of [UNKNOWN_OPERATOR, foreign.operatorId, sleeper.operatorId]) {
      const res = await app.api(w.key, 'GET', `/conversations?owner=${owner}`);
      assert.equal(res.statusCode, 404, owner);
      assert.equal(res.json().error.code, 'M2M_NOT_FOUND');
    }
  });

  test("another tenant's conversations never appear", async () => {
    const w = await world();
    const other = await inboxTenant(app, ['conversations:read']);
    const theirs = await inbound(app, other.tenantId, other.channelId, { name: 'María López', phone: '+52 55 1234 5678' });
    assert.notEqual(theirs.contactId, w.maria.contactId, 'contacts are per tenant');

    const mine = ids(await w.list());
    assert.ok(!mine.includes(theirs.conversationId));
    assert.equal(mine.length, 4);
    assert.ok(!ids(await w.list({ contactQuery: 'lóp' })).includes(theirs.conversationId));
    const seenByThem = await app.api(other.key, 'GET', '/conversations');
    assert.deepEqual(seenByThem.json().conversations.map((c: Item) => c.conversationId), [theirs.conversationId]);
    assert.deepEqual(seenByThem.json().inboxCounts, { total: 1, unread: 1, needsReply: 1 });
  });

  test('needs conversations:read', async () => {
    const { key } = await inboxTenant(app, ['conversations:triage:write', 'conversations:assignment:read']);
    const res = await app.api(key, 'GET', '/conversations');
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().error.code, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.deepEqual(res.json().error.details, { requiredScopes: ['conversations:read'], missingScopes: ['conversations:read'] });
    // The scope check comes before validation: a caller without access learns nothing about input rules.
    assert.equal((await app.api(key, 'GET', '/conversations?owner=mine')).statusCode, 403);
    assert.equal((await app.api(undefined, 'GET', '/conversations')).statusCode, 401);
  });
});

describe('GET /conversations/assignable-operators', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  test('lists the active operators of the tenant only', async () => {
    const { tenantId, key } = await inboxTenant(app, ['conversations:assignment:read']);
    const ana = await addOperator(app, tenantId, 'Ana Díaz', 'ana@example.com');
    const bo = await addOperator(app, tenantId, 'Bo Chen', 'bo@example.com');
    const gone = await addOperator(app, tenantId, 'Gone Person', 'gone@example.com');
    await app.admin('PATCH', `/tenants/${tenantId}/operators/${gone.operatorId}`, { active: false });
    const other = await app.tenantWithKey(['conversations:assignment:read']);
    await addOperator(app, other.tenantId, 'Not Ours', 'other@example.com');

    const res = await app.api(key, 'GET', '/conversations/assignable-operators');
    assert.equal(res.statusCode, 200);
    const body = res.json() as { operators: Array<{ operatorId: string }> };
    assert.deepEqual(Object.keys(body), ['operators']);
    const byId = (a: { operatorId: string }, b: { operatorId: string }) => a.operatorId.localeCompare(b.operatorId);
    assert.deepEqual(
      [...body.operators].sort(byId),
      [
        { operatorId: ana.operatorId, displayName: 'Ana Díaz', email: 'ana@example.com' },
        { operatorId: bo.operatorId, displayName: 'Bo Chen', email: 'bo@example.com' },
      ].sort(byId),
    );

    // Reactivated operators come back.
    await app.admin('PATCH', `/tenants/${tenantId}/operators/${gone.operatorId}`, { active: true });
    const again = (await app.api(key, 'GET', '/conversations/assignable-operators')).json() as { operators: Array<{ operatorId: string }> };
    assert.equal(again.operators.length, 3);

    const empty = await app.tenantWithKey(['conversations:assignment:read']);
    assert.deepEqual((await app.api(empty.key, 'GET', '/conversations/assignable-operators')).json(), { operators: [] });
  });

  test('needs conversations:assignment:read', async () => {
    const { key } = await app.tenantWithKey(['conversations:read']);
    const res = await app.api(key, 'GET', '/conversations/assignable-operators');
    assert.equal(res.statusCode, 403);
    assert.deepEqual(res.json().error.details, { requiredScopes: ['conversations:assignment:read'], missingScopes: ['conversations:assignment:read'] });
  });
});
