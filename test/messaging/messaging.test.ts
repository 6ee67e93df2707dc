import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { monotonicClock } from '../helpers/inbox.js';

// Conversation start, template readiness, message request status and delivery events with the
// sandbox provider (the default): it accepts every send at once, and status then moves only through
// the admin provider-status route.

const TEMPLATE = 'conversation_start';
const SCOPES = ['conversations:write', 'conversations:read', 'messages:read'];
const READY_LOCALES = [
  { locale: 'en_US', status: 'approved', ready: true },
  { locale: 'es_MX', status: 'approved', ready: true },
];

let phoneSeq = 0;
/** A valid, unique Mexico City mobile number in E.164. */
const nextPhone = (): string => `+5255${20_000_000 + ++phoneSeq}`;

interface World {
  tenantId: string;
  key: string;
  channelId: string;
  phone: string;
  contactId: string;
}

interface Accepted {
  conversationId: string;
  replyId: string;
  requestEventId: string;
}

interface StatusRecord {
  requestEventId: string;
  status: string;
  conversationId: string;
  replyId: string;
  channel: string;
  createdAt: string;
  updatedAt: string;
  error?: { code: string; message: string };
}

interface Envelope {
  eventId: string;
  type: string;
  tenantId: string;
  data: Record<string, unknown>;
}

async function addContact(app: TestApp, tenantId: string, phone: string, consent = true): Promise<string> {
  const contact = await app.admin<{ contactId: string }>('POST', `/tenants/${tenantId}/contacts`, { phone, consent });
  return contact.contactId;
}

/** Tenant + key, a WhatsApp channel whose template is ready in both locales, and a consenting contact. */
async function setupWorld(app: TestApp, options: { scopes?: string[]; locales?: unknown[] | null } = {}): Promise<World> {
  const { tenantId, key } = await app.tenantWithKey(options.scopes ?? SCOPES);
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp line' });
  if (options.locales !== null) {
    await app.admin('PUT', `/tenants/${tenantId}/channels/${channelId}/templates/${TEMPLATE}`, { category: 'UTILITY', locales: options.locales ?? READY_LOCALES });
  }
  const phone = nextPhone();
  return { tenantId, key, channelId, phone, contactId: await addContact(app, tenantId, phone) };
}

function startBody(world: World, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { channelId: world.channelId, recipientPhone: world.phone, locale: 'es_MX', messageText: 'Hola, su reserva está confirmada.', ...overrides };
}

/** POST /conversations/start; `idempotencyKey` null sends no Idempotency-Key header. */
function start(app: TestApp, world: World, body: Record<string, unknown> = startBody(world), idempotencyKey: string | null = randomUUID(), key = world.key) {
  return app.api(key, 'POST', '/conversations/start', body, idempotencyKey === null ? {} : { 'idempotency-key': idempotencyKey });
}

async function accepted(res: LightMyRequestResponse): Promise<Accepted> {
  assert.equal(res.statusCode, 202, res.body);
  return res.json() as Accepted;
}

async function requestStatus(app: TestApp, world: World, requestEventId: string): Promise<StatusRecord> {
  const res = await app.api(world.key, 'GET', `/message-requests/${requestEventId}/status`);
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as StatusRecord;
}

function providerStatus(app: TestApp, tenantId: string, requestEventId: string, body: unknown) {
  return app.adminRaw('POST', `/tenants/${tenantId}/message-requests/${requestEventId}/provider-status`, body);
}

function assertError(res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as { error: { code: string; message: string; details: Record<string, unknown> } };
  assert.equal(body.error.code, code, res.body);
  return { ...body.error.details, message: body.error.message };
}

/** Rows a conversation start writes, for one tenant. */
async function footprint(app: TestApp, tenantId: string) {
  const db = app.runtime.services.db;
  const count = async (sql: string) => (await db.query<{ n: number }>(sql, [tenantId]))[0].n;
  return {
    contacts: await count('SELECT count(*)::int AS n FROM contacts WHERE tenant_id = $1'),
    conversations: await count('SELECT count(*)::int AS n FROM conversations WHERE tenant_id = $1'),
    messages: await count('SELECT count(*)::int AS n FROM messages WHERE tenant_id = $1'),
    messageRequests: await count('SELECT count(*)::int AS n FROM message_requests WHERE tenant_id = $1'),
    sendJobs: await count(`SELECT count(*)::int AS n FROM jobs WHERE tenant_id = $1 AND task = 'messaging.send'`),
    events: await count('SELECT count(*)::int AS n FROM webhook_events WHERE tenant_id = $1'),
  };
}

async function eventCount(app: TestApp, tenantId: string, type: string): Promise<number> {
  const rows = await app.runtime.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_events WHERE tenant_id = $1 AND type = $2', [tenantId, type]);
  return rows[0].n;
}

describe('conversation start: readiness, validation, preconditions, idempotency (no workers)', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp({ clock: monotonicClock() });
  });
  after(async () => {
    await app.close();
  });

  describe('GET /conversations/start/whatsapp-template-status', () => {
    const status = (key: string, query: string) => app.api(key, 'GET', `/conversations/start/whatsapp-template-status${query}`);

    test('both locales not_prepared before setup; the persisted readiness after the admin PUT', async () => {
      const world = await setupWorld(app, { locales: null });
      const before = await status(world.key, `?channelId=${world.channelId}`);
      assert.equal(before.statusCode, 200, before.body);
      assert.deepEqual(before.json(), {
        channelId: world.channelId,
        locales: [
          { locale: 'en_US', status: 'not_prepared', ready: false },
          { locale: 'es_MX', status: 'not_prepared', ready: false },
        ],
      });

      const put = await app.admin<{ locales: Array<{ locale: string; lastFetchedAt: string }> }>('PUT', `/tenants/${world.tenantId}/channels/${world.channelId}/templates/${TEMPLATE}`, {
        category: 'UTILITY',
        locales: [
          { locale: 'en_US', status: 'approved', ready: true },
          { locale: 'es_MX', status: 'pending', ready: false },
        ],
      });
      const fetchedAt = put.locales[0].lastFetchedAt;
      assert.match(fetchedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

      const after = await status(world.key, `?channelId=${world.channelId}`);
      assert.equal(after.statusCode, 200, after.body);
      assert.deepEqual(after.json(), {
        channelId: world.channelId,
        templateName: TEMPLATE,
        category: 'UTILITY',
        locales: [
          { locale: 'en_US', status: 'approved', ready: true, lastFetchedAt: fetchedAt },
          { locale: 'es_MX', status: 'pending', ready: false, lastFetchedAt: fetchedAt },
        ],
      });
    });

    test('a locale the template record does not list is not_prepared', async () => {
      const world = await setupWorld(app, { locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
      const res = await status(world.key, `?channelId=${world.channelId}`);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json() as { locales: Array<Record<string, unknown>> };
      assert.equal(body.locales[0].status, 'approved');
      assert.deepEqual(body.locales[1], { locale: 'es_MX', status: 'not_prepared', ready: false });
    });

    test('read-only: calling it changes nothing (lastFetchedAt and the stored record stay as they were)', async () => {
      const world = await setupWorld(app);
      const stored = async () =>
        (await app.runtime.services.db.query<{ updated_at: Date; locales: unknown }>('SELECT updated_at, locales FROM channel_templates WHERE channel_id = $1', [world.channelId]))[0];
      const storedBefore = await stored();
      const first = await status(world.key, `?channelId=${world.channelId}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const second = await status(world.key, `?channelId=${world.channelId}`);
      assert.equal(first.statusCode, 200);
      assert.deepEqual(second.json(), first.json());
      const storedAfter = await stored();
      assert.equal(storedAfter.updated_at.getTime(), storedBefore.updated_at.getTime());
      assert.deepEqual(storedAfter.locales, storedBefore.locales);
      assert.equal((await footprint(app, world.tenantId)).events, 0);
    });

    test('channelId missing, longer than 120, or an unknown query parameter: 400', async () => {
      const world = await setupWorld(app);
      assertError(await status(world.key, ''), 400, 'M2M_INVALID_REQUEST');
      assertError(await status(world.key, '?channelId='), 400, 'M2M_INVALID_REQUEST');
      assertError(await status(world.key, `?channelId=${'c'.repeat(121)}`), 400, 'M2M_INVALID_REQUEST');
      assertError(await status(world.key, `?channelId=${world.channelId}&refresh=true`), 400, 'M2M_INVALID_REQUEST');
      // 120 characters is a valid length: it is simply not found.
      assertError(await status(world.key, `?channelId=${'c'.repeat(120)}`), 404, 'M2M_NOT_FOUND');
    });

    test("another tenant's channel is 404; a webchat channel is 400", async () => {
      const world = await setupWorld(app);
      const stranger = await setupWorld(app);
      const foreign = await status(world.key, `?channelId=${stranger.channelId}`);
      const unknown = await status(world.key, '?channelId=ch_doesnotexist');
      assertError(foreign, 404, 'M2M_NOT_FOUND');
      assert.deepEqual(foreign.json().error.code, unknown.json().error.code);
      assert.equal(foreign.json().error.message, unknown.json().error.message, 'a foreign channel is indistinguishable from a missing one');

      const webchat = await app.admin<{ channelId: string }>('POST', `/tenants/${world.tenantId}/channels`, { kind: 'webchat', name: 'Site chat' });
      assertError(await status(world.key, `?channelId=${webchat.channelId}`), 400, 'M2M_INVALID_REQUEST');
    });

    test('needs conversations:read (403 with requiredScopes); conversations:write implies it', async () => {
      const world = await setupWorld(app);
      const other = await app.admin<{ key: string }>('POST', `/tenants/${world.tenantId}/api-keys`, { name: 'messages only', scopes: ['messages:read'] });
      const details = assertError(await status(other.key, `?channelId=${world.channelId}`), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(details.requiredScopes, ['conversations:read']);
      assert.deepEqual(details.missingScopes, ['conversations:read']);
      const writer = await app.admin<{ key: string }>('POST', `/tenants/${world.tenantId}/api-keys`, { name: 'writer', scopes: ['conversations:write'] });
      assert.equal((await status(writer.key, `?channelId=${world.channelId}`)).statusCode, 200);
    });
  });

  describe('POST /conversations/start: accepted', () => {
    test('202 with exactly {conversationId, replyId, requestEventId}; the request is queued until a worker runs', async () => {
      const world = await setupWorld(app);
      const res = await start(app, world, startBody(world, { contactName: 'María López' }));
      const body = await accepted(res);
      assert.deepEqual(Object.keys(body).sort(), ['conversationId', 'replyId', 'requestEventId']);
      assert.equal(res.headers['idempotent-replayed'], undefined);
      const record = await requestStatus(app, world, body.requestEventId);
      assert.deepEqual(Object.keys(record).sort(), ['channel', 'conversationId', 'createdAt', 'replyId', 'requestEventId', 'status', 'updatedAt']);
      assert.equal(record.status, 'queued');
      assert.equal(record.requestEventId, body.requestEventId);
      assert.equal(record.conversationId, body.conversationId);
      assert.equal(record.replyId, body.replyId);
      assert.equal(record.channel, 'whatsapp');
      assert.ok(!Number.isNaN(Date.parse(record.createdAt)) && !Number.isNaN(Date.parse(record.updatedAt)));

      const footprintAfter = await footprint(app, world.tenantId);
      assert.deepEqual(footprintAfter, { contacts: 1, conversations: 1, messages: 1, messageRequests: 1, sendJobs: 1, events: 1 });
      const [message] = await app.runtime.services.db.query<{ id: string; direction: string; text: string; request_event_id: string }>(
        'SELECT id, direction, text, request_event_id FROM messages WHERE tenant_id = $1',
        [world.tenantId],
      );
      assert.deepEqual(message, { id: body.replyId, direction: 'outbound', text: 'Hola, su reserva está confirmada.', request_event_id: body.requestEventId });
    });

    test('GET /conversations shows the started conversation with its preview and the contact name', async () => {
      const world = await setupWorld(app);
      const body = await accepted(await start(app, world, startBody(world, { contactName: 'Ana Torres', messageText: 'Your room is ready.' })));
      const list = await app.api(world.key, 'GET', '/conversations');
      assert.equal(list.statusCode, 200, list.body);
      const { conversations } = list.json() as { conversations: Array<Record<string, unknown>> };
      const item = conversations.find((c) => c.conversationId === body.conversationId);
      assert.ok(item, 'the conversation is listed');
      assert.equal(item.channel, 'whatsapp');
      assert.equal(item.channelId, world.channelId);
      assert.equal(item.lastMessagePreview, 'Your room is ready.');
      assert.deepEqual(item.contact, { contactId: world.contactId, name: 'Ana Torres', phone: world.phone });
    });

    test('a second start to the same recipient on the same channel continues the same conversation', async () => {
      const world = await setupWorld(app);
      const first = await accepted(await start(app, world));
      const second = await accepted(await start(app, world, startBody(world, { locale: 'en_US', messageText: 'Second message' })));
      assert.equal(second.conversationId, first.conversationId);
      assert.notEqual(second.replyId, first.replyId);
      assert.notEqual(second.requestEventId, first.requestEventId);
    });

    test('messageText of exactly 1024 characters is accepted; the preview is shortened', async () => {
      const world = await setupWorld(app);
      const body = await accepted(await start(app, world, startBody(world, { messageText: 'x'.repeat(1024) })));
      const list = (await app.api(world.key, 'GET', '/conversations')).json() as { conversations: Array<{ conversationId: string; lastMessagePreview: string }> };
      const preview = list.conversations.find((c) => c.conversationId === body.conversationId)!.lastMessagePreview;
      assert.ok(preview.length < 1024);
      const [row] = await app.runtime.services.db.query<{ text: string }>('SELECT text FROM message_requests WHERE id = $1', [body.requestEventId]);
      assert.equal(row.text.length, 1024, 'the full text is what gets sent');
    });

    test('needs conversations:write (403 with requiredScopes), checked before the body and the key', async () => {
      const world = await setupWorld(app);
      const reader = await app.admin<{ key: string }>('POST', `/tenants/${world.tenantId}/api-keys`, { name: 'reader', scopes: ['conversations:read', 'messages:read'] });
      const details = assertError(await start(app, world, startBody(world), randomUUID(), reader.key), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(details.requiredScopes, ['conversations:write']);
      assert.deepEqual(details.missingScopes, ['conversations:write']);
      assertError(await start(app, world, { nonsense: true }, null, reader.key), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assertError(await app.api(undefined, 'POST', '/conversations/start', startBody(world), { 'idempotency-key': randomUUID() }), 401, 'M2M_AUTH_MISSING_CREDENTIALS');
      assert.equal((await footprint(app, world.tenantId)).messageRequests, 0);
    });
  });

  describe('POST /conversations/start: refused input and preconditions create nothing', () => {
    test('invalid bodies: 400 M2M_INVALID_REQUEST', async () => {
      const world = await setupWorld(app);
      const before = await footprint(app, world.tenantId);
      const cases: Array<[string, Record<string, unknown>]> = [
        ['messageText of 1025 characters', startBody(world, { messageText: 'x'.repeat(1025) })],
        ['empty messageText', startBody(world, { messageText: '' })],
        ['locale fr_FR', startBody(world, { locale: 'fr_FR' })],
        ['recipientPhone not E.164', startBody(world, { recipientPhone: '5512345678' })],
        ['recipientPhone with spaces', startBody(world, { recipientPhone: '+52 55 2000 0001' })],
        ['unknown property', startBody(world, { templateName: 'other' })],
        ['messageText as a number', startBody(world, { messageText: 42 })],
        ['channelId of 121 characters', startBody(world, { channelId: 'c'.repeat(121) })],
      ];
      for (const field of ['channelId', 'recipientPhone', 'locale', 'messageText']) {
        const body = startBody(world);
        delete body[field];
        cases.push([`missing ${field}`, body]);
      }
      for (const [name, body] of cases) {
        const res = await start(app, world, body);
        assert.equal(res.statusCode, 400, `${name}: ${res.body}`);
        assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST', name);
      }
      const unknown = await start(app, world, startBody(world, { templateName: 'other' }));
      assert.match(unknown.body, /templateName/, 'the unknown property is named');
      // E.164-shaped but not a number that exists (Mexico dropped the mobile "1" in 2019): 400 naming the field.
      const notANumber = assertError(await start(app, world, startBody(world, { recipientPhone: '+5215512345678' })), 400, 'M2M_INVALID_REQUEST');
      assert.deepEqual((notANumber.issues as Array<{ path: string }>).map((issue) => issue.path), ['body.recipientPhone']);
      assert.deepEqual(await footprint(app, world.tenantId), before);
    });

    test('Idempotency-Key missing or longer than 255 characters: 400; 255 characters is accepted', async () => {
      const world = await setupWorld(app);
      assertError(await start(app, world, startBody(world), null), 400, 'M2M_INVALID_REQUEST');
      assertError(await start(app, world, startBody(world), ''), 400, 'M2M_INVALID_REQUEST');
      assertError(await start(app, world, startBody(world), 'k'.repeat(256)), 400, 'M2M_INVALID_REQUEST');
      assert.equal((await footprint(app, world.tenantId)).messageRequests, 0);
      await accepted(await start(app, world, startBody(world), 'k'.repeat(255)));
    });

    test('channel: foreign or unknown 404; not WhatsApp 400; unavailable 400', async () => {
      const world = await setupWorld(app);
      const stranger = await setupWorld(app);
      const before = await footprint(app, world.tenantId);
      assertError(await start(app, world, startBody(world, { channelId: stranger.channelId })), 404, 'M2M_NOT_FOUND');
      assertError(await start(app, world, startBody(world, { channelId: 'ch_doesnotexist' })), 404, 'M2M_NOT_FOUND');

      const webchat = await app.admin<{ channelId: string }>('POST', `/tenants/${world.tenantId}/channels`, { kind: 'webchat', name: 'Site chat' });
      assertError(await start(app, world, startBody(world, { channelId: webchat.channelId })), 400, 'M2M_INVALID_REQUEST');

      const off = await app.admin<{ channelId: string }>('POST', `/tenants/${world.tenantId}/channels`, { kind: 'whatsapp', name: 'Old number', available: false });
      await app.admin('PUT', `/tenants/${world.tenantId}/channels/${off.channelId}/templates/${TEMPLATE}`, { category: 'UTILITY', locales: READY_LOCALES });
      const unavailable = assertError(await start(app, world, startBody(world, { channelId: off.channelId })), 400, 'M2M_INVALID_REQUEST');
      assert.equal(unavailable.reason, 'channel_unavailable');

      assert.deepEqual(await footprint(app, world.tenantId), before);
      assert.deepEqual(await footprint(app, stranger.tenantId), { contacts: 1, conversations: 0, messages: 0, messageRequests: 0, sendJobs: 0, events: 0 });
    });

    test('template not prepared for the locale: 400 naming the locale', async () => {
      const world = await setupWorld(app, { locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
      const before = await footprint(app, world.tenantId);
      const missing = assertError(await start(app, world, startBody(world, { locale: 'es_MX' })), 400, 'M2M_INVALID_REQUEST');
      assert.match(String(missing.message), /es_MX/);
      assert.equal(missing.reason, 'template_not_prepared');
      assert.equal(missing.locale, 'es_MX');

      // Listed but not ready (pending approval) is refused too.
      await app.admin('PUT', `/tenants/${world.tenantId}/channels/${world.channelId}/templates/${TEMPLATE}`, {
        category: 'UTILITY',
        locales: [
          { locale: 'en_US', status: 'approved', ready: true },
          { locale: 'es_MX', status: 'pending', ready: false },
        ],
      });
      const pending = assertError(await start(app, world, startBody(world, { locale: 'es_MX' })), 400, 'M2M_INVALID_REQUEST');
      assert.match(String(pending.message), /es_MX/);
      assert.equal(pending.status, 'pending');

      // A channel with no template at all.
      const bare = await app.admin<{ channelId: string }>('POST', `/tenants/${world.tenantId}/channels`, { kind: 'whatsapp', name: 'New number' });
      const none = assertError(await start(app, world, startBody(world, { channelId: bare.channelId, locale: 'en_US' })), 400, 'M2M_INVALID_REQUEST');
      assert.match(String(none.message), /en_US/);
      assert.deepEqual(await footprint(app, world.tenantId), before);

      // The prepared locale is accepted.
      await accepted(await start(app, world, startBody(world, { locale: 'en_US' })));
    });

    test('recipient without consent: 409 recipient_no_consent; an unknown recipient is not created', async () => {
      const world = await setupWorld(app);
      const noConsent = nextPhone();
      await addContact(app, world.tenantId, noConsent, false);
      const before = await footprint(app, world.tenantId);
      const details = assertError(await start(app, world, startBody(world, { recipientPhone: noConsent })), 409, 'M2M_CONFLICT');
      assert.equal(details.reason, 'recipient_no_consent');
      const stranger = assertError(await start(app, world, startBody(world, { recipientPhone: nextPhone(), contactName: 'Nobody' })), 409, 'M2M_CONFLICT');
      assert.equal(stranger.reason, 'recipient_no_consent');
      assert.deepEqual(await footprint(app, world.tenantId), before, 'no contact, conversation, message, request, job or event');
    });

    test('opted-out recipient: 409 recipient_opted_out, even with consent', async () => {
      const world = await setupWorld(app);
      await app.admin('PATCH', `/tenants/${world.tenantId}/contacts/${world.contactId}`, { optedOut: true });
      const before = await footprint(app, world.tenantId);
      const details = assertError(await start(app, world), 409, 'M2M_CONFLICT');
      assert.equal(details.reason, 'recipient_opted_out');
      assert.deepEqual(await footprint(app, world.tenantId), before);
      await app.admin('PATCH', `/tenants/${world.tenantId}/contacts/${world.contactId}`, { optedOut: false });
      await accepted(await start(app, world));
    });

    test('a failed send blocks new sends to the recipient (409 unreconciled_failed_attempt) until it is reconciled', async () => {
      const world = await setupWorld(app);
      const first = await accepted(await start(app, world));
      const failed = await providerStatus(app, world.tenantId, first.requestEventId, { status: 'failed', error: { code: 'undeliverable', message: 'number not on WhatsApp' } });
      assert.equal(failed.statusCode, 200, failed.body);

      const before = await footprint(app, world.tenantId);
      const blocked = assertError(await start(app, world, startBody(world, { messageText: 'Trying again' })), 409, 'M2M_CONFLICT');
      assert.equal(blocked.reason, 'unreconciled_failed_attempt');
      assert.equal(blocked.requestEventId, first.requestEventId);
      assert.deepEqual(await footprint(app, world.tenantId), before);

      // Another recipient is not affected.
      const otherPhone = nextPhone();
      await addContact(app, world.tenantId, otherPhone);
      await accepted(await start(app, world, startBody(world, { recipientPhone: otherPhone })));

      // Reconcile needs conversations:write.
      const reader = await app.admin<{ key: string }>('POST', `/tenants/${world.tenantId}/api-keys`, { name: 'reader', scopes: ['conversations:read', 'messages:read'] });
      const forbidden = assertError(await app.api(reader.key, 'POST', `/message-requests/${first.requestEventId}/reconcile`), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(forbidden.requiredScopes, ['conversations:write']);

      const reconciled = await app.api(world.key, 'POST', `/message-requests/${first.requestEventId}/reconcile`);
      assert.equal(reconciled.statusCode, 200, reconciled.body);
      assert.equal(reconciled.json().status, 'failed');
      assert.equal(reconciled.json().requestEventId, first.requestEventId);
      assert.equal(reconciled.json().reconciled, true);
      assert.deepEqual(reconciled.json().error, { code: 'undeliverable', message: 'number not on WhatsApp' });

      const again = await accepted(await start(app, world, startBody(world, { messageText: 'Trying again' })));
      assert.equal(again.conversationId, first.conversationId);
      assert.equal((await requestStatus(app, world, again.requestEventId)).status, 'queued');
    });

    test('reconcile: a request that has not failed is 409; unknown or foreign is 404', async () => {
      const world = await setupWorld(app);
      const stranger = await setupWorld(app);
      const queued = await accepted(await start(app, world));
      const conflict = assertError(await app.api(world.key, 'POST', `/message-requests/${queued.requestEventId}/reconcile`), 409, 'M2M_CONFLICT');
      assert.equal(conflict.status, 'queued');
      assertError(await app.api(world.key, 'POST', '/message-requests/mrq_doesnotexist/reconcile'), 404, 'M2M_NOT_FOUND');
      const theirs = await accepted(await start(app, stranger));
      await providerStatus(app, stranger.tenantId, theirs.requestEventId, { status: 'failed' });
      assertError(await app.api(world.key, 'POST', `/message-requests/${theirs.requestEventId}/reconcile`), 404, 'M2M_NOT_FOUND');
      assert.equal((await requestStatus(app, stranger, theirs.requestEventId)).status, 'failed');
      const blocked = assertError(await start(app, stranger), 409, 'M2M_CONFLICT');
      assert.equal(blocked.reason, 'unreconciled_failed_attempt', "the other tenant's reconcile attempt changed nothing");
    });
  });

  describe('Idempotency-Key', () => {
    test('same key and body: the stored 202 is replayed with Idempotent-Replayed, and only one send exists', async () => {
      const world = await setupWorld(app);
      const key = randomUUID();
      const first = await start(app, world, startBody(world), key);
      const body = await accepted(first);
      assert.equal(first.headers['idempotent-replayed'], undefined);
      for (let i = 0; i < 2; i++) {
        const replay = await start(app, world, startBody(world), key);
        assert.equal(replay.statusCode, 202, replay.body);
        assert.equal(replay.headers['idempotent-replayed'], 'true');
        assert.deepEqual(replay.json(), body);
      }
      // Property order does not make a body different.
      const reordered = Object.fromEntries(Object.entries(startBody(world)).reverse());
      const replay = await start(app, world, reordered, key);
      assert.equal(replay.statusCode, 202);
      assert.equal(replay.headers['idempotent-replayed'], 'true');

      const rows = await app.runtime.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM message_requests WHERE tenant_id = $1', [world.tenantId]);
      assert.equal(rows[0].n, 1);
      assert.deepEqual(await footprint(app, world.tenantId), { contacts: 1, conversations: 1, messages: 1, messageRequests: 1, sendJobs: 1, events: 1 });
    });

    test('same key with a different body: 409 M2M_IDEMPOTENCY_CONFLICT and nothing new', async () => {
      const world = await setupWorld(app);
      const key = randomUUID();
      await accepted(await start(app, world, startBody(world), key));
      const before = await footprint(app, world.tenantId);
      for (const change of [{ messageText: 'Something else' }, { locale: 'en_US' }, { contactName: 'Added' }]) {
        const res = await start(app, world, startBody(world, change), key);
        assertError(res, 409, 'M2M_IDEMPOTENCY_CONFLICT');
      }
      assert.deepEqual(await footprint(app, world.tenantId), before);
    });

    test("another tenant's key of the same value does not collide", async () => {
      const mine = await setupWorld(app);
      const theirs = await setupWorld(app);
      const key = `shared-${randomUUID()}`;
      const a = await accepted(await start(app, mine, startBody(mine), key));
      const res = await start(app, theirs, startBody(theirs), key);
      const b = await accepted(res);
      assert.equal(res.headers['idempotent-replayed'], undefined);
      assert.notEqual(b.requestEventId, a.requestEventId);
      assert.equal((await footprint(app, theirs.tenantId)).messageRequests, 1);
    });

    test('a refused start does not use up its key: the corrected retry with the same key is accepted', async () => {
      const world = await setupWorld(app);
      await app.admin('PATCH', `/tenants/${world.tenantId}/contacts/${world.contactId}`, { consent: false });
      const key = randomUUID();
      assertError(await start(app, world, startBody(world), key), 409, 'M2M_CONFLICT');
      await app.admin('PATCH', `/tenants/${world.tenantId}/contacts/${world.contactId}`, { consent: true });
      const res = await start(app, world, startBody(world), key);
      await accepted(res);
      assert.equal(res.headers['idempotent-replayed'], undefined);
    });

    test('concurrent requests with one key: one send; the others replay it or are told to retry (409)', async () => {
      const world = await setupWorld(app);
      const key = randomUUID();
      const responses = await Promise.all(Array.from({ length: 5 }, () => start(app, world, startBody(world), key)));
      const ok = responses.filter((r) => r.statusCode === 202);
      assert.ok(ok.length >= 1);
      for (const r of responses) {
        if (r.statusCode !== 202) assertError(r, 409, 'M2M_IDEMPOTENCY_CONFLICT');
      }
      for (const r of ok) assert.deepEqual(r.json(), ok[0].json());
      assert.equal((await footprint(app, world.tenantId)).messageRequests, 1);
    });
  });

  describe('GET /message-requests/{requestEventId}/status', () => {
    test("unknown or another tenant's request: 404 (indistinguishable)", async () => {
      const world = await setupWorld(app);
      const stranger = await setupWorld(app);
      const theirs = await accepted(await start(app, stranger));
      const foreign = await app.api(world.key, 'GET', `/message-requests/${theirs.requestEventId}/status`);
      const unknown = await app.api(world.key, 'GET', '/message-requests/mrq_doesnotexist/status');
      assertError(foreign, 404, 'M2M_NOT_FOUND');
      assertError(unknown, 404, 'M2M_NOT_FOUND');
      assert.equal(foreign.json().error.message, unknown.json().error.message);
      assert.equal((await requestStatus(app, stranger, theirs.requestEventId)).status, 'queued');
    });

    test('needs messages:read', async () => {
      const world = await setupWorld(app);
      const body = await accepted(await start(app, world));
      const writer = await app.admin<{ key: string }>('POST', `/tenants/${world.tenantId}/api-keys`, { name: 'writer', scopes: ['conversations:write'] });
      const details = assertError(await app.api(writer.key, 'GET', `/message-requests/${body.requestEventId}/status`), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(details.requiredScopes, ['messages:read']);
      const reader = await app.admin<{ key: string }>('POST', `/tenants/${world.tenantId}/api-keys`, { name: 'reader', scopes: ['messages:read'] });
      assert.equal((await app.api(reader.key, 'GET', `/message-requests/${body.requestEventId}/status`)).statusCode, 200);
    });

    test('admin provider-status: unknown or foreign request 404; an error on a non-failed status 400', async () => {
      const world = await setupWorld(app);
      const stranger = await setupWorld(app);
      const body = await accepted(await start(app, world));
      assertError(await providerStatus(app, world.tenantId, 'mrq_doesnotexist', { status: 'sent' }), 404, 'M2M_NOT_FOUND');
      assertError(await providerStatus(app, stranger.tenantId, body.requestEventId, { status: 'sent' }), 404, 'M2M_NOT_FOUND');
      assertError(await providerStatus(app, world.tenantId, body.requestEventId, { status: 'delivered', error: { code: 'x', message: 'y' } }), 400, 'M2M_INVALID_REQUEST');
      assertError(await providerStatus(app, world.tenantId, body.requestEventId, { status: 'queued' }), 400, 'M2M_INVALID_REQUEST');
      assert.equal((await requestStatus(app, world, body.requestEventId)).status, 'queued');
    });
  });
});

describe('conversation start: the send, status changes and events (sandbox provider, workers)', () => {
  let app: TestApp;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let workers: Promise<void> | undefined;

  before(async () => {
    receiver = await startReceiver();
    app = await startTestApp({ env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' }, clock: monotonicClock() });
  });
  after(async () => {
    await app.close();
    await receiver.close();
  });

  /** Workers start on first use, so the first test can observe a request before any worker ran. */
  const workersOn = () => (workers ??= app.runtime.startWorkers());

  const envelopes = (tenantId: string, type?: string): Envelope[] =>
    receiver.received
      .map((r) => JSON.parse(r.body) as Envelope)
      .filter((e) => e.tenantId === tenantId && (type === undefined || e.type === type));

  async function subscribedWorld(): Promise<World> {
    const world = await setupWorld(app, { scopes: [...SCOPES, 'webhooks:write'] });
    const sub = await app.api(world.key, 'POST', '/webhooks', { url: receiver.url, events: ['message.created', 'message.delivery.updated'] });
    assert.equal(sub.statusCode, 201, sub.body);
    return world;
  }

  const deliveryEvent = (world: World, requestEventId: string, status: string) =>
    eventually(
      async () => envelopes(world.tenantId, 'message.delivery.updated').find((e) => e.data.requestEventId === requestEventId && e.data.status === status),
      15_000,
      `message.delivery.updated ${status}`,
    );

  const untilStatus = (world: World, requestEventId: string, status: string) =>
    eventually(
      async () => {
        const record = await requestStatus(app, world, requestEventId);
        return record.status === status ? record : undefined;
      },
      15_000,
      `status ${status}`,
    );

  test('queued, then sent once a worker runs; message.created and message.delivery.updated reach the receiver', async () => {
    const world = await subscribedWorld();
    const body = await accepted(await start(app, world));
    const queued = await requestStatus(app, world, body.requestEventId);
    assert.equal(queued.status, 'queued');

    await workersOn();
    const sent = await untilStatus(world, body.requestEventId, 'sent');
    assert.deepEqual(Object.keys(sent).sort(), ['channel', 'conversationId', 'createdAt', 'replyId', 'requestEventId', 'status', 'updatedAt']);
    assert.equal(sent.createdAt, queued.createdAt);
    assert.ok(Date.parse(sent.updatedAt) >= Date.parse(queued.updatedAt));

    const created = await eventually(async () => envelopes(world.tenantId, 'message.created')[0], 15_000, 'message.created');
    assert.deepEqual(created.data, { messageId: body.replyId, conversationId: body.conversationId, direction: 'outbound', channel: 'whatsapp', type: 'template', requestEventId: body.requestEventId });
    assert.ok(!JSON.stringify(created).includes('reserva'), 'the event carries identifiers, not content');

    const update = await deliveryEvent(world, body.requestEventId, 'sent');
    assert.equal(update.data.replyId, body.replyId);
    assert.equal(update.data.conversationId, body.conversationId);
    assert.match(String(update.data.providerMessageId), /^sbx_/);
    assert.equal(await eventCount(app, world.tenantId, 'message.delivery.updated'), 1);

    const job = await app.runtime.services.db.query<{ state: string; attempts: number }>(`SELECT state, attempts FROM jobs WHERE tenant_id = $1 AND task = 'messaging.send'`, [world.tenantId]);
    assert.deepEqual(job, [{ state: 'succeeded', attempts: 1 }]);
  });

  test('provider status delivered then read, each emitting message.delivery.updated; a late delivered changes nothing', async () => {
    await workersOn();
    const world = await subscribedWorld();
    const body = await accepted(await start(app, world));
    await untilStatus(world, body.requestEventId, 'sent');
    assert.equal(await eventCount(app, world.tenantId, 'message.delivery.updated'), 1);

    const delivered = await providerStatus(app, world.tenantId, body.requestEventId, { status: 'delivered' });
    assert.equal(delivered.statusCode, 200, delivered.body);
    assert.equal(delivered.json().status, 'delivered');
    assert.equal((await requestStatus(app, world, body.requestEventId)).status, 'delivered');
    await deliveryEvent(world, body.requestEventId, 'delivered');

    const read = await providerStatus(app, world.tenantId, body.requestEventId, { status: 'read' });
    assert.equal(read.statusCode, 200, read.body);
    assert.equal(read.json().status, 'read');
    const readEvent = await deliveryEvent(world, body.requestEventId, 'read');
    assert.equal(readEvent.data.replyId, body.replyId);
    assert.equal(await eventCount(app, world.tenantId, 'message.delivery.updated'), 3);
    const readRecord = await requestStatus(app, world, body.requestEventId);

    // Late and repeated callbacks: no change, no event.
    for (const status of ['delivered', 'sent', 'read', 'failed']) {
      const late = await providerStatus(app, world.tenantId, body.requestEventId, { status });
      assert.equal(late.statusCode, 200, late.body);
      assert.equal(late.json().status, 'read', `${status} after read`);
    }
    assert.deepEqual(await requestStatus(app, world, body.requestEventId), readRecord);
    assert.equal(await eventCount(app, world.tenantId, 'message.delivery.updated'), 3);
    // Everything emitted was delivered, and nothing more arrives.
    await eventually(async () => envelopes(world.tenantId, 'message.delivery.updated').length === 3, 15_000, 'three deliveries');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(
      envelopes(world.tenantId, 'message.delivery.updated').map((e) => e.data.status).sort(),
      ['delivered', 'read', 'sent'],
    );
  });

  test('failed with an error on a sent request: status failed with error {code, message}; nothing moves it afterwards', async () => {
    await workersOn();
    const world = await subscribedWorld();
    const body = await accepted(await start(app, world));
    await untilStatus(world, body.requestEventId, 'sent');
    const failed = await providerStatus(app, world.tenantId, body.requestEventId, { status: 'failed', error: { code: 'recipient_unreachable', message: 'The number is not on WhatsApp' } });
    assert.equal(failed.statusCode, 200, failed.body);
    const record = await requestStatus(app, world, body.requestEventId);
    assert.equal(record.status, 'failed');
    assert.deepEqual(record.error, { code: 'recipient_unreachable', message: 'The number is not on WhatsApp' });
    const event = await deliveryEvent(world, body.requestEventId, 'failed');
    assert.equal(event.data.replyId, body.replyId);

    for (const status of ['delivered', 'read', 'sent']) {
      assert.equal((await providerStatus(app, world.tenantId, body.requestEventId, { status })).json().status, 'failed');
    }
    assert.deepEqual(await requestStatus(app, world, body.requestEventId), record);
    assert.equal(await eventCount(app, world.tenantId, 'message.delivery.updated'), 2);

    // A failure without a provider error still says what happened.
    const otherPhone = nextPhone();
    await addContact(app, world.tenantId, otherPhone);
    const second = await accepted(await start(app, world, startBody(world, { recipientPhone: otherPhone })));
    await untilStatus(world, second.requestEventId, 'sent');
    await providerStatus(app, world.tenantId, second.requestEventId, { status: 'failed' });
    const bare = await requestStatus(app, world, second.requestEventId);
    assert.equal(bare.status, 'failed');
    assert.equal(typeof bare.error?.code, 'string');
    assert.equal(typeof bare.error?.message, 'string');
  });

  test('a read receipt may skip delivered; a sent request can go straight to read', async () => {
    await workersOn();
    const world = await subscribedWorld();
    const body = await accepted(await start(app, world));
    await untilStatus(world, body.requestEventId, 'sent');
    assert.equal((await providerStatus(app, world.tenantId, body.requestEventId, { status: 'read' })).json().status, 'read');
    assert.equal((await providerStatus(app, world.tenantId, body.requestEventId, { status: 'delivered' })).json().status, 'read');
    assert.equal(await eventCount(app, world.tenantId, 'message.delivery.updated'), 2);
  });
});
