import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { buildAjv } from '../../src/http/validation.js';
import { buildTools } from '../../src/mcp/tools.js';
import { toolName } from '../../src/operations/catalogue.js';
import { emit } from '../../src/webhooks/events.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';

// The catch-up feed (GET /events, decisions 6.3) and the event-type catalogue, through the real app and database.

const DAY = 24 * 60 * 60 * 1000;
let app: TestApp;
const clock = new ManualClock('2026-11-01T10:00:00.000Z');

interface Envelope {
  eventId: string;
  type: string;
  schemaVersion: string;
  tenantId: string;
  occurredAt: string;
  data: Record<string, unknown>;
}
interface Page {
  events: Envelope[];
  nextCursor: string;
  hasMore: boolean;
}

before(async () => {
  app = await startTestApp({ clock });
});
after(() => app.close());

async function emitTest(tenantId: string, type: string, data: Record<string, unknown> = {}): Promise<string> {
  return (await app.admin<{ eventId: string }>('POST', `/tenants/${tenantId}/webhook-events`, { type, data })).eventId;
}

async function page(key: string, query: string): Promise<Page> {
  const res = await app.api(key, 'GET', `/events${query}`);
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/** Follows nextCursor from `cursor` until a page is not full; returns the ids read and the last cursor. */
async function follow(key: string, cursor: string | undefined, limit: number, types?: string): Promise<{ ids: string[]; cursor: string }> {
  const ids: string[] = [];
  for (;;) {
    const params = new URLSearchParams({ limit: String(limit), ...(cursor ? { cursor } : {}), ...(types ? { types } : {}) });
    const body = await page(key, `?${params}`);
    ids.push(...body.events.map((event) => event.eventId));
    assert.ok(body.nextCursor, 'nextCursor is always present');
    cursor = body.nextCursor;
    if (!body.hasMore) return { ids, cursor };
  }
}

/**
 * follow() until `count` events are read. On PostgreSQL the feed exposes an event only once every older
 * transaction of the server has ended, and other test files share the server: their transactions may hold
 * the horizon back for a moment.
 */
function followUntil(key: string, cursor: string | undefined, limit: number, count: number, types?: string) {
  return eventually(async () => {
    const result = await follow(key, cursor, limit, types);
    return result.ids.length >= count ? result : undefined;
  }, 10_000, `${count} events in the feed`);
}

test('the feed lists readable events oldest first, and its cursor returns only newer ones', async () => {
  const { tenantId, key } = await app.tenantWithKey(['conversations:read', 'crm:sales:read']);
  const other = await app.tenantWithKey(['conversations:read', 'crm:sales:read', 'messages:read']);
  const first = await emitTest(tenantId, 'message.created', { messageId: 'msg_1' });
  await emitTest(tenantId, 'message.delivery.updated', { requestEventId: 'req_1' }); // needs messages:read
  const second = await emitTest(tenantId, 'crm.opportunity.created', { opportunityId: 'opp_1' });
  await emitTest(other.tenantId, 'message.created', { messageId: 'msg_other' });
  const third = await emitTest(tenantId, 'conversation.handoff.updated', { caseId: 'hof_1' });

  await followUntil(key, undefined, 50, 3);
  const all = await page(key, '');
  assert.deepEqual(all.events.map((e) => e.eventId), [first, second, third]);
  assert.equal(all.hasMore, false);
  assert.deepEqual(all.events[0], { eventId: first, type: 'message.created', schemaVersion: '1.0', tenantId, occurredAt: clock.now().toISOString(), data: { messageId: 'msg_1' } });

  const paged = await followUntil(key, undefined, 1, 3);
  assert.deepEqual(paged.ids, [first, second, third], 'pages of one, following nextCursor');
  assert.deepEqual((await page(key, `?cursor=${paged.cursor}`)).events, [], 'nothing new yet');

  const fourth = await emitTest(tenantId, 'message.created', { messageId: 'msg_2' });
  await emitTest(tenantId, 'message.delivery.updated', { requestEventId: 'req_2' });
  assert.deepEqual((await followUntil(key, paged.cursor, 50, 1)).ids, [fourth], 'only the newer readable event');

  const filtered = await followUntil(key, undefined, 1, 2, 'message.created');
  assert.deepEqual(filtered.ids, [first, fourth]);
  const fifth = await emitTest(tenantId, 'message.created', { messageId: 'msg_3' });
  assert.deepEqual((await followUntil(key, filtered.cursor, 1, 1, 'message.created')).ids, [fifth]);
});

test('types, limits and cursors are checked; unreadable types are 403, a key that reads no event type is 403', async () => {
  const { key } = await app.tenantWithKey(['conversations:read']);
  const unreadable = await app.api(key, 'GET', '/events?types=message.created,crm.opportunity.updated');
  assert.equal(unreadable.statusCode, 403, unreadable.body);
  assert.deepEqual(unreadable.json().error, {
    code: 'M2M_AUTH_INSUFFICIENT_SCOPE',
    message: unreadable.json().error.message,
    details: { requiredScopes: ['conversations:read', 'crm:sales:read'], missingScopes: ['crm:sales:read'] },
  });
  assert.ok(unreadable.headers['x-request-id']);

  const none = await app.tenantWithKey(['reservations:read']);
  const refused = await app.api(none.key, 'GET', '/events');
  assert.equal(refused.statusCode, 403);
  assert.deepEqual(refused.json().error.details.missingScopes, refused.json().error.details.requiredScopes);
  assert.ok(refused.json().error.details.requiredScopes.includes('conversations:read'));

  assert.equal((await app.api(key, 'GET', '/events?types=message.nope')).statusCode, 400);
  assert.equal((await app.api(key, 'GET', '/events?limit=0')).statusCode, 400);
  assert.equal((await app.api(key, 'GET', '/events?limit=201')).statusCode, 400);
  assert.equal((await app.api(key, 'GET', '/events?cursor=abc.def')).json().error.code, 'M2M_INVALID_CURSOR');
  const { nextCursor } = await page(key, '?types=message.created');
  const rebound = await app.api(key, 'GET', `/events?cursor=${nextCursor}`);
  assert.equal(rebound.statusCode, 400, 'a cursor is bound to its types filter');
  assert.equal(rebound.json().error.code, 'M2M_INVALID_CURSOR');
});

test('the stored event bodies are sent as they are: the same bytes and content-type as the response serializer would write', async () => {
  const { tenantId, key } = await app.tenantWithKey(['conversations:read']);
  // Escapes, non-ASCII, U+2028, integer-like keys (JavaScript orders them first), nesting, numbers, null.
  const awkward = { z: 'quote " backslash \\ tab \t newline \n', 10: 'ten', 2: ['a', { b: null }], 'ñandú 🐦': 'line\u2028sep', n: 1e21, f: -0.5, t: true };
  const id = await emitTest(tenantId, 'message.created', awkward);
  await emitTest(tenantId, 'message.created', { messageId: 'msg_plain' });
  await followUntil(key, undefined, 50, 2);
  const tools = buildTools();
  const serialize = (operationId: string, body: unknown) => {
    const tool = tools.get(toolName(operationId));
    assert.ok(tool);
    return tool.serialize(body);
  };
  for (const [operationId, url] of [['listEvents', '/events?limit=1'], ['listEvents', '/events'], ['getEvent', `/events/${id}`]] as const) {
    const res = await app.api(key, 'GET', url);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(res.body, serialize(operationId, res.json()), `${url}: byte for byte what the serializer writes`);
  }
  const one = await app.api(key, 'GET', `/events/${id}`);
  assert.deepEqual(one.json().event.data, JSON.parse(JSON.stringify(awkward)));
});

test('GET /events/{eventId}: readable events only; another tenant’s, unknown, unreadable and expired are 404', async () => {
  const { tenantId, key } = await app.tenantWithKey(['conversations:read']);
  const other = await app.tenantWithKey(['conversations:read', 'crm:sales:read']);
  const readable = await emitTest(tenantId, 'message.created', { messageId: 'msg_9' });
  const unreadable = await emitTest(tenantId, 'crm.opportunity.updated', { opportunityId: 'opp_9' });

  const res = await app.api(key, 'GET', `/events/${readable}`);
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().event.eventId, readable);
  assert.equal(res.json().event.data.messageId, 'msg_9');
  for (const [who, id] of [[key, unreadable], [key, 'evt_unknown'], [other.key, readable]] as const) {
    const missing = await app.api(who, 'GET', `/events/${id}`);
    assert.equal(missing.statusCode, 404, missing.body);
    assert.equal(missing.json().error.code, 'M2M_NOT_FOUND');
  }

  clock.advance(30 * DAY + 1000);
  assert.equal((await app.api(key, 'GET', `/events/${readable}`)).statusCode, 404, 'expired after 30 days');
  assert.equal((await page(key, '')).events.length, 0, 'the feed keeps 30 days');
  const purged = await app.runtime.services.events.purgeExpired();
  assert.ok(purged >= 2, `${purged} purged`);
  const left = await app.runtime.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_events WHERE id = ANY ($1)', [[readable, unreadable]]);
  assert.equal(left[0].n, 0);
});

test('a consumer following nextCursor never misses an event whose transaction commits after a later one', { skip: process.env.DATABASE_URL ? false : 'PGlite runs one transaction at a time: commits cannot be reordered there' }, async () => {
  const { tenantId, key } = await app.tenantWithKey(['conversations:read']);
  const db = app.runtime.services.db;
  const start = (await page(key, '')).nextCursor;

  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let written!: () => void;
  const firstWritten = new Promise<void>((resolve) => (written = resolve));
  // T1 writes its event first (older transaction id), then stays open while T2 writes and commits.
  const slow = db.transaction(async (tx) => {
    const event = await emit(tx, clock.now(), tenantId, 'message.created', { messageId: 'msg_slow', conversationId: 'cnv_1', direction: 'inbound', channel: 'webchat', type: 'text' });
    written();
    await gate;
    return event.eventId;
  });
  await firstWritten;
  const fast = await db.transaction((tx) => emit(tx, clock.now(), tenantId, 'message.created', { messageId: 'msg_fast', conversationId: 'cnv_1', direction: 'inbound', channel: 'webchat', type: 'text' }));

  // The later event is committed, but the feed does not pass the transaction still in flight.
  const during = await page(key, `?cursor=${start}`);
  assert.deepEqual(during.events, [], 'nothing is exposed past an open transaction');

  release();
  const slowId = await slow;
  // Other test files' transactions on the same server may hold the horizon back for a moment.
  const seen = await followUntil(key, during.nextCursor, 50, 2);
  assert.deepEqual(seen.ids, [slowId, fast.eventId], 'following the cursor kept during the open transaction returns both');
});

test('the event-type catalogue describes every type, and emitted events match their schema', async () => {
  const { tenantId, key } = await app.tenantWithKey(['webhooks:read', 'conversations:read']);
  const res = await app.api(key, 'GET', '/webhooks/event-types');
  assert.equal(res.statusCode, 200, res.body);
  const { eventTypes } = res.json() as { eventTypes: Array<{ type: string; description: string; requiredScope: string; schemaVersion: string; schema: Record<string, unknown> }> };
  const byType = new Map(eventTypes.map((entry) => [entry.type, entry]));
  assert.deepEqual([...byType.keys()].sort(), [
    'conversation.handoff.updated',
    'crm.opportunity.created',
    'crm.opportunity.updated',
    'knowledge.crawl.completed',
    'knowledge.crawl.failed',
    'message.created',
    'message.delivery.updated',
    'webhook.subscription.disabled',
  ]);
  assert.equal(byType.get('knowledge.crawl.completed')?.requiredScope, 'knowledge:read');
  assert.equal(byType.get('webhook.subscription.disabled')?.requiredScope, 'webhooks:read');
  assert.equal(byType.get('message.delivery.updated')?.requiredScope, 'messages:read');
  for (const entry of eventTypes) {
    assert.equal(entry.schemaVersion, '1.0');
    assert.equal(entry.schema.type, 'object');
    assert.ok(entry.description.length > 10);
  }

  // A real inbound message emits message.created through the typed emit(): its data matches the catalogue.
  const channel = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'webchat', name: 'Web' });
  await app.admin('POST', `/tenants/${tenantId}/inbound-messages`, { channelId: channel.channelId, contact: { name: 'Ana', handle: 'ana' }, text: 'Hola' });
  await followUntil(key, undefined, 50, 1, 'message.created');
  const [event] = (await page(key, '?types=message.created')).events;
  const validate = buildAjv({ coerceTypes: false }).compile(byType.get('message.created')!.schema);
  assert.ok(validate(event.data), JSON.stringify(validate.errors));
  assert.equal(event.data.direction, 'inbound');
  assert.ok(!validate({ ...event.data, direction: 'sideways' }), 'the schema is strict enough to fail');
});
