import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { addChannel, inbound, monotonicClock } from '../helpers/inbox.js';

interface Attempt {
  createdAt: string;
  lifecycleEventType: string;
  result: string;
  reason: string;
  attemptCount: number;
  duplicateCount: number;
  triggerSource: string;
  senderPhoneNumber?: string;
  senderLabel?: string;
  conversationId?: string;
  conversationLink?: string;
  requestEventId?: string;
}

interface Mirror {
  provider: string;
  integrationId: string;
  providerReservationId: string;
  status: string;
  lastSyncedAt: string;
  updatedAt: string;
  integrationName: string;
  propertyId?: string;
  propertyName?: string;
  checkInDate: string;
  checkOutDate: string;
  sourceUpdatedAt?: string;
  sourceFreshnessAt: string;
  bookedAt: string;
  guestFullName: string;
  guestEmail?: string;
  guestPhone?: string;
  guestPhoneNormalized?: string;
  attemptsCount: number;
  attempts: Attempt[];
}

interface ListBody {
  mirrors: Mirror[];
  filters: { integrations: Array<{ provider: string; integrationId: string; integrationName: string }> };
  availableStatuses: string[];
  availableSorts: Array<{ sortBy: string; sortDir: string; label: string }>;
  pageSize: number;
  hasNext: boolean;
  nextCursor?: string;
}

const GUEST_PHONE = '+34612345678';

function qs(params: Record<string, string | undefined>): string {
  const parts = Object.entries(params).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${encodeURIComponent(v!)}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

function stay(over: Record<string, unknown> = {}) {
  return { status: 'confirmed', checkInDate: '2031-07-01', checkOutDate: '2031-07-04', bookedAt: '2031-01-01T10:00:00.000Z', guestFullName: 'Ana López', ...over };
}

/** A tenant with a key, one PMS integration and helpers bound to them. */
async function pmsTenant(app: TestApp, scopes = ['reservations:write', 'messages:read']) {
  const tenant = await app.tenantWithKey(scopes);
  const integration = await app.admin<{ integrationId: string }>('POST', `/tenants/${tenant.tenantId}/integrations`, { provider: 'pms', name: 'Front desk PMS' });
  const sync = (id: string, body: Record<string, unknown>, integrationId = integration.integrationId) =>
    app.adminRaw('PUT', `/tenants/${tenant.tenantId}/integrations/${integrationId}/reservations/${encodeURIComponent(id)}`, body);
  const put = async (id: string, body: Record<string, unknown>, integrationId?: string): Promise<Mirror> => {
    const res = await sync(id, body, integrationId);
    assert.ok(res.statusCode === 200 || res.statusCode === 201, `sync ${id} → ${res.statusCode} ${res.body}`);
    return res.json();
  };
  const list = async (params: Record<string, string | undefined> = {}): Promise<ListBody> => {
    const res = await app.api(tenant.key, 'GET', `/reservations${qs(params)}`);
    assert.equal(res.statusCode, 200, res.body);
    return res.json();
  };
  const sender = async (name = 'Front desk', extra: Record<string, unknown> = {}) =>
    (await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'whatsapp', name, phoneNumber: '+34910000000', ...extra })).channelId;
  const setting = (body: Record<string, unknown>, integrationId = integration.integrationId) =>
    app.api(tenant.key, 'PUT', `/reservations/lifecycle-settings/${integrationId}`, body);
  return { ...tenant, integrationId: integration.integrationId, sync, put, list, sender, setting };
}

describe('reservations', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ clock: monotonicClock() });
  });
  after(() => app.close());

  test('integrations: 201 with integrationId, provider, name; provider must be pms; unknown tenant 404', async () => {
    const { tenantId } = await app.tenantWithKey([]);
    const res = await app.adminRaw('POST', `/tenants/${tenantId}/integrations`, { provider: 'pms', name: 'PMS' });
    assert.equal(res.statusCode, 201);
    assert.deepEqual(Object.keys(res.json()).sort(), ['integrationId', 'name', 'provider']);
    assert.equal((await app.adminRaw('POST', `/tenants/${tenantId}/integrations`, { provider: 'channel_manager', name: 'x' })).statusCode, 400);
    assert.equal((await app.adminRaw('POST', `/tenants/ten_missing/integrations`, { provider: 'pms', name: 'x' })).statusCode, 404);
  });

  test('sync is an idempotent upsert; an older sourceUpdatedAt is ignored; phones are normalised', async () => {
    const t = await pmsTenant(app);
    const property = await app.admin<{ propertyId: string }>('POST', `/tenants/${t.tenantId}/properties`, { name: 'Casa Azul' });
    const body = stay({ propertyId: property.propertyId, guestPhone: '+34 612 345 678', guestEmail: 'ana@example.com', sourceUpdatedAt: '2031-01-02T00:00:00.000Z' });
    const first = await t.sync('R-1', body);
    assert.equal(first.statusCode, 201);
    const created: Mirror = first.json();
    assert.equal(created.provider, 'pms');
    assert.equal(created.integrationName, 'Front desk PMS');
    assert.equal(created.propertyName, 'Casa Azul');
    assert.equal(created.checkInDate, '2031-07-01');
    assert.equal(created.guestPhone, '+34 612 345 678');
    assert.equal(created.guestPhoneNormalized, GUEST_PHONE);
    assert.equal(created.sourceUpdatedAt, '2031-01-02T00:00:00.000Z');
    assert.equal(created.sourceFreshnessAt, '2031-01-02T00:00:00.000Z');

    const again = await t.sync('R-1', body);
    assert.equal(again.statusCode, 200);
    const replayed: Mirror = again.json();
    assert.equal(replayed.updatedAt, created.updatedAt, 'an identical sync changes nothing');
    assert.ok(replayed.lastSyncedAt > created.lastSyncedAt, 'but counts as a sync');
    assert.equal((await t.list()).mirrors.length, 1);

    const newer = await t.put('R-1', { ...body, status: 'checked_in', sourceUpdatedAt: '2031-01-03T00:00:00.000Z' });
    assert.equal(newer.status, 'checked_in');
    assert.ok(newer.updatedAt > created.updatedAt);
    const stale = await t.sync('R-1', { ...body, status: 'cancelled', sourceUpdatedAt: '2031-01-02T12:00:00.000Z' });
    assert.equal(stale.statusCode, 200);
    assert.deepEqual(stale.json(), newer, 'a stale update returns the stored mirror unchanged');

    const junk = await t.put('R-2', stay({ guestPhone: 'call me' }));
    assert.equal(junk.guestPhone, 'call me');
    assert.equal(junk.guestPhoneNormalized, undefined);
  });

  test('sync input: dates, foreign integration and property, unknown fields', async () => {
    const t = await pmsTenant(app);
    const other = await pmsTenant(app);
    const otherProperty = await app.admin<{ propertyId: string }>('POST', `/tenants/${other.tenantId}/properties`, { name: 'Elsewhere' });
    for (const bad of [
      stay({ checkInDate: '2031-02-30' }),
      stay({ checkInDate: '2031-7-1' }),
      stay({ checkInDate: '2031-07-05', checkOutDate: '2031-07-04' }),
      stay({ bookedAt: 'yesterday' }),
      stay({ nights: 3 }),
      { status: 'confirmed' },
    ]) {
      const res = await t.sync('R-bad', bad);
      assert.equal(res.statusCode, 400, JSON.stringify(bad));
      assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST');
    }
    assert.equal((await t.sync('R-x', stay(), other.integrationId)).statusCode, 404);
    assert.equal((await t.sync('R-x', stay({ propertyId: otherProperty.propertyId }))).statusCode, 404);
    assert.equal((await t.sync('R-x', stay({ checkInDate: '2031-07-04' }))).statusCode, 201, 'check-out on the check-in day is allowed');
  });

  test('list: 45 mirrors in pages of 20, both sorts both directions, no duplicate and no gap', async () => {
    const t = await pmsTenant(app);
    for (let i = 0; i < 45; i++) {
      const day = String(1 + (i % 15)).padStart(2, '0');
      const booked = new Date(Date.UTC(2031, 0, 1, 0, 0, 0) + ((i * 7) % 45) * 3_600_000).toISOString();
      await t.put(`R-${i}`, stay({ checkInDate: `2031-08-${day}`, checkOutDate: '2031-08-20', bookedAt: booked, status: i % 3 === 0 ? 'cancelled' : 'confirmed' }));
    }
    for (const sortBy of ['check_in_date', 'booked_at'] as const) {
      for (const sortDir of ['asc', 'desc'] as const) {
        const seen: Mirror[] = [];
        let cursor: string | undefined;
        const sizes: number[] = [];
        do {
          const page = await t.list({ sortBy, sortDir, cursor });
          assert.equal(page.pageSize, 20);
          sizes.push(page.mirrors.length);
          seen.push(...page.mirrors);
          assert.equal(page.hasNext, page.nextCursor !== undefined);
          cursor = page.nextCursor;
        } while (cursor);
        assert.deepEqual(sizes, [20, 20, 5], `${sortBy} ${sortDir}`);
        assert.equal(new Set(seen.map((m) => m.providerReservationId)).size, 45, `${sortBy} ${sortDir}: no duplicate, no gap`);
        const values = seen.map((m) => (sortBy === 'check_in_date' ? m.checkInDate : m.bookedAt));
        const sorted = [...values].sort();
        assert.deepEqual(values, sortDir === 'asc' ? sorted : sorted.reverse(), `${sortBy} ${sortDir} order`);
      }
    }
    const first = await t.list();
    assert.equal(first.mirrors[0].checkInDate, '2031-08-01', 'default sort is check_in_date asc');
    assert.deepEqual(first.availableStatuses, ['cancelled', 'confirmed']);
    assert.deepEqual(first.availableSorts.map((s) => `${s.sortBy}:${s.sortDir}`), ['check_in_date:asc', 'check_in_date:desc', 'booked_at:asc', 'booked_at:desc']);
    assert.ok(first.availableSorts.every((s) => s.label.length > 0));
    assert.deepEqual(first.filters.integrations, [{ provider: 'pms', integrationId: t.integrationId, integrationName: 'Front desk PMS' }]);

    const cancelled = await t.list({ status: 'cancelled' });
    assert.equal(cancelled.mirrors.length, 15);
    assert.ok(cancelled.mirrors.every((m) => m.status === 'cancelled'));
    assert.equal(cancelled.hasNext, false);
    const one = await t.list({ reservationId: 'R-7' });
    assert.deepEqual(one.mirrors.map((m) => m.providerReservationId), ['R-7']);
    assert.equal((await t.list({ reservationId: 'R-' })).mirrors.length, 0, 'reservationId matches exactly');

    // A second integration: the filter narrows to it.
    const second = await app.admin<{ integrationId: string }>('POST', `/tenants/${t.tenantId}/integrations`, { provider: 'pms', name: 'Second PMS' });
    await t.put('R-0', stay(), second.integrationId);
    const narrowed = await t.list({ integrationId: second.integrationId });
    assert.deepEqual(narrowed.mirrors.map((m) => [m.integrationId, m.providerReservationId]), [[second.integrationId, 'R-0']]);
    assert.equal((await t.list({ integrationId: t.integrationId })).hasNext, true);

    // Cursors are bound to filters and sorting.
    const page = await t.list({ sortBy: 'booked_at' });
    for (const changed of [{ sortBy: 'booked_at', sortDir: 'desc' }, { sortBy: 'check_in_date' }, { sortBy: 'booked_at', status: 'confirmed' }, { sortBy: 'booked_at', integrationId: t.integrationId }]) {
      const res = await app.api(t.key, 'GET', `/reservations${qs({ ...changed, cursor: page.nextCursor })}`);
      assert.equal(res.statusCode, 400, JSON.stringify(changed));
      assert.equal(res.json().error.code, 'M2M_INVALID_CURSOR');
    }
    const tampered = await app.api(t.key, 'GET', `/reservations${qs({ sortBy: 'booked_at', cursor: page.nextCursor!.slice(0, -2) + 'xx' })}`);
    assert.equal(tampered.json().error.code, 'M2M_INVALID_CURSOR');
  });

  test('list input: sort, lengths, unknown parameters, foreign integration, scope', async () => {
    const t = await pmsTenant(app, ['reservations:read']);
    const other = await pmsTenant(app);
    const cases: Array<[Record<string, string>, number]> = [
      [{ sortBy: 'guest_name' }, 400],
      [{ sortDir: 'up' }, 400],
      [{ integrationId: 'i'.repeat(161) }, 400],
      [{ reservationId: 'r'.repeat(501) }, 400],
      [{ status: 's'.repeat(161) }, 400],
      [{ cursor: 'c'.repeat(401) }, 400],
      [{ limit: '5' }, 400],
      [{ reservationId: 'r'.repeat(500), status: 's'.repeat(160) }, 200],
      [{ integrationId: other.integrationId }, 404],
      [{ integrationId: 'int_missing' }, 404],
    ];
    for (const [params, status] of cases) {
      const res = await app.api(t.key, 'GET', `/reservations${qs(params)}`);
      assert.equal(res.statusCode, status, `${JSON.stringify(params)} → ${res.body}`);
    }
    const noScope = await app.tenantWithKey(['messages:read']);
    assert.equal((await app.api(noScope.key, 'GET', '/reservations')).statusCode, 403);
  });

  test('tenant isolation: another tenant never sees the mirrors', async () => {
    const a = await pmsTenant(app);
    const b = await pmsTenant(app);
    await a.put('SHARED-1', stay({ guestPhone: GUEST_PHONE }));
    await b.put('SHARED-1', stay({ status: 'tentative' }));
    const seenByB = await b.list();
    assert.deepEqual(seenByB.mirrors.map((m) => [m.integrationId, m.status]), [[b.integrationId, 'tentative']]);
    assert.deepEqual(seenByB.availableStatuses, ['tentative']);
    assert.deepEqual(seenByB.filters.integrations.map((i) => i.integrationId), [b.integrationId]);
    assert.equal((await app.api(b.key, 'GET', `/reservations?integrationId=${a.integrationId}`)).statusCode, 404);
    assert.equal((await app.api(b.key, 'PUT', `/reservations/lifecycle-settings/${a.integrationId}`, { eventType: 'pre_checkin', enabled: false })).statusCode, 404);
  });

  test('conversation-linked reservations: phone formats normalise to match, at most five, totalCount counts all', async () => {
    const t = await pmsTenant(app);
    const channelId = await t.sender();
    const conversation = await inbound(app, t.tenantId, channelId, { name: 'Ana', phone: '+34 612-34-56-78' });
    const formats = ['+34 612 345 678', '+34612345678', '(+34) 612-345-678', '+34-612-34-56-78', '+34 612 34 56 78', '+34612345678'];
    for (const [i, phone] of formats.entries()) await t.put(`L-${i}`, stay({ guestPhone: phone, checkInDate: `2031-09-0${i + 1}`, checkOutDate: '2031-09-20' }));
    await t.put('L-other', stay({ guestPhone: '+44 7911 123456' }));
    await t.put('L-none', stay());

    const res = await app.api(t.key, 'GET', `/conversations/${conversation.conversationId}/reservations`);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.conversationId, conversation.conversationId);
    assert.equal(body.matchPhoneNormalized, GUEST_PHONE);
    assert.equal(body.totalCount, 6);
    assert.equal(body.reservations.length, 5);
    assert.deepEqual(body.reservations.map((r: Mirror) => r.providerReservationId), ['L-5', 'L-4', 'L-3', 'L-2', 'L-1'], 'latest check-in first');
    assert.equal(body.reservations[0].attempts, undefined, 'linked reservations carry no attempts');

    const social = await addChannel(app, t.tenantId, 'instagram');
    const noPhone = await inbound(app, t.tenantId, social, { handle: '@ana' });
    const empty = await app.api(t.key, 'GET', `/conversations/${noPhone.conversationId}/reservations`);
    assert.deepEqual(empty.json(), { conversationId: noPhone.conversationId, reservations: [], totalCount: 0 });

    const other = await pmsTenant(app);
    assert.equal((await app.api(other.key, 'GET', `/conversations/${conversation.conversationId}/reservations`)).statusCode, 404);
    assert.equal((await app.api(t.key, 'GET', `/conversations/${'c'.repeat(201)}/reservations`)).statusCode, 400);
  });

  test('lifecycle settings: read, enable with a sender, 400 and 404 cases, no send on enable', async () => {
    const t = await pmsTenant(app, ['reservations:write']);
    const wa = await t.sender('Reception');
    await t.sender('Closed line', { available: false });
    await addChannel(app, t.tenantId, 'instagram');
    await t.put('S-1', stay({ guestPhone: GUEST_PHONE }));

    const read = await app.api(t.key, 'GET', '/reservations/lifecycle-settings');
    assert.equal(read.statusCode, 200);
    assert.deepEqual(read.json(), {
      integrations: [
        {
          integrationId: t.integrationId,
          integrationName: 'Front desk PMS',
          provider: 'pms',
          events: ['booking_confirmed', 'pre_checkin', 'post_checkout_review'].map((eventType) => ({ eventType, enabled: false, channelId: null })),
        },
      ],
      senders: [{ channelId: wa, name: 'Reception', phoneNumber: '+34910000000' }],
    });

    const other = await pmsTenant(app);
    const foreignChannel = await other.sender();
    const unavailable = (await app.admin<{ channelId: string }>('POST', `/tenants/${t.tenantId}/channels`, { kind: 'whatsapp', name: 'Off', available: false })).channelId;
    const instagram = await addChannel(app, t.tenantId, 'instagram');
    const cases: Array<[Record<string, unknown>, number, string?]> = [
      [{ eventType: 'booking_confirmed', enabled: true }, 400],
      [{ eventType: 'booking_confirmed', enabled: true, channelId: null }, 400],
      [{ eventType: 'booking_confirmed', enabled: true, channelId: 'ch_missing' }, 404],
      [{ eventType: 'booking_confirmed', enabled: true, channelId: foreignChannel }, 404],
      [{ eventType: 'booking_confirmed', enabled: true, channelId: instagram }, 400],
      [{ eventType: 'booking_confirmed', enabled: true, channelId: unavailable }, 400],
      [{ eventType: 'booking_cancelled', enabled: false }, 400],
      [{ eventType: 'pre_checkin', enabled: false, extra: 1 }, 400],
      [{ eventType: 'pre_checkin', enabled: false }, 404, other.integrationId],
      [{ eventType: 'pre_checkin', enabled: false }, 404, 'int_missing'],
    ];
    for (const [body, status, integrationId] of cases) {
      const res = await t.setting(body, integrationId);
      assert.equal(res.statusCode, status, `${JSON.stringify(body)} → ${res.body}`);
    }

    const enabled = await t.setting({ eventType: 'pre_checkin', enabled: true, channelId: wa });
    assert.equal(enabled.statusCode, 200, enabled.body);
    assert.deepEqual(enabled.json().events[1], { eventType: 'pre_checkin', enabled: true, channelId: wa });
    const disabled = await t.setting({ eventType: 'pre_checkin', enabled: false });
    assert.deepEqual(disabled.json().events[1], { eventType: 'pre_checkin', enabled: false, channelId: wa }, 'disabling keeps the sender');
    const reEnabled = await t.setting({ eventType: 'pre_checkin', enabled: true });
    assert.equal(reEnabled.statusCode, 200, 'the stored sender is enough to enable');
    await t.setting({ eventType: 'booking_confirmed', enabled: true, channelId: wa });
    const after = (await app.api(t.key, 'GET', '/reservations/lifecycle-settings')).json();
    assert.deepEqual(after.integrations[0].events.map((e: { enabled: boolean }) => e.enabled), [true, true, false]);

    const sent = await app.runtime.services.db.query('SELECT id FROM message_requests WHERE tenant_id = $1', [t.tenantId]);
    assert.equal(sent.length, 0, 'enabling changes future messaging only');
    const reader = await app.admin<{ key: string }>('POST', `/tenants/${t.tenantId}/api-keys`, { name: 'ro', scopes: ['reservations:read'] });
    assert.equal((await app.api(reader.key, 'PUT', `/reservations/lifecycle-settings/${t.integrationId}`, { eventType: 'pre_checkin', enabled: false })).statusCode, 403);
    assert.equal((await app.api(reader.key, 'GET', '/reservations/lifecycle-settings')).statusCode, 200);
  });

  test('lifecycle on sync: disabled → skipped; enabled → would_send and a queued message; re-confirm → duplicate', async () => {
    const t = await pmsTenant(app);
    const wa = await t.sender('Reception');
    await app.admin('PUT', `/tenants/${t.tenantId}/channels/${wa}/templates/guest_start`, { category: 'utility', locales: [{ locale: 'en_US', status: 'approved', ready: true }] });

    const off = await t.put('B-1', stay({ guestPhone: GUEST_PHONE }));
    assert.equal(off.attemptsCount, 1);
    assert.equal(off.attempts[0].lifecycleEventType, 'booking_confirmed');
    assert.equal(off.attempts[0].result, 'skipped');
    assert.equal(off.attempts[0].reason, 'event_disabled');
    assert.equal(off.attempts[0].triggerSource, 'sync_transition');

    assert.equal((await t.setting({ eventType: 'booking_confirmed', enabled: true, channelId: wa })).statusCode, 200);
    assert.equal((await t.put('B-2', stay({ guestPhone: GUEST_PHONE }))).attempts[0].reason, 'contact_without_consent');
    assert.equal((await t.put('B-3', stay())).attempts[0].reason, 'no_guest_phone');
    assert.equal((await t.put('B-4', stay({ guestPhone: 'n/a' }))).attempts[0].reason, 'guest_phone_invalid');
    await app.admin('POST', `/tenants/${t.tenantId}/contacts`, { phone: '+447911123456', consent: true, optedOut: true });
    assert.equal((await t.put('B-5', stay({ guestPhone: '+44 7911 123456' }))).attempts[0].reason, 'contact_opted_out');
    assert.equal((await t.put('B-6', stay({ checkInDate: '2001-01-01', checkOutDate: '2001-01-03' }))).attempts[0].result, 'invalid');

    await app.admin('POST', `/tenants/${t.tenantId}/contacts`, { phone: GUEST_PHONE, consent: true });
    const sent = await t.put('B-7', stay({ guestPhone: '+34 612 345 678' }));
    const attempt = sent.attempts[0];
    assert.equal(attempt.result, 'would_send', JSON.stringify(attempt));
    assert.equal(attempt.senderPhoneNumber, '+34910000000');
    assert.equal(attempt.senderLabel, 'Reception');
    assert.ok(attempt.conversationId);
    assert.equal(attempt.conversationLink, `/conversations/${attempt.conversationId}`);
    const status = await app.api(t.key, 'GET', `/message-requests/${attempt.requestEventId}/status`);
    assert.equal(status.statusCode, 200, status.body);
    assert.equal(status.json().status, 'queued');
    assert.equal(status.json().conversationId, attempt.conversationId);
    const [request] = await app.runtime.services.db.query<{ template_name: string; locale: string; recipient_phone: string; text: string }>(
      'SELECT template_name, locale, recipient_phone, text FROM message_requests WHERE tenant_id = $1 AND id = $2',
      [t.tenantId, attempt.requestEventId],
    );
    assert.deepEqual([request.template_name, request.locale, request.recipient_phone], ['guest_start', 'en_US', GUEST_PHONE]);
    assert.match(request.text, /Hi Ana, your reservation is confirmed/);

    // The same sync again changes nothing and evaluates nothing.
    assert.equal((await t.put('B-7', stay({ guestPhone: '+34 612 345 678' }))).attemptsCount, 1);
    // Leaving confirmed and coming back is a duplicate, never a second send.
    await t.put('B-7', stay({ guestPhone: '+34 612 345 678', status: 'modified' }));
    const back = await t.put('B-7', stay({ guestPhone: '+34 612 345 678' }));
    assert.equal(back.attemptsCount, 2);
    assert.deepEqual([back.attempts[0].result, back.attempts[0].duplicateCount, back.attempts[0].attemptCount], ['duplicate', 1, 2]);
    assert.deepEqual([back.attempts[1].result, back.attempts[1].duplicateCount], ['would_send', 1], 'the original send counts its duplicates');
    const requests = await app.runtime.services.db.query('SELECT id FROM message_requests WHERE tenant_id = $1', [t.tenantId]);
    assert.equal(requests.length, 1);

    const out = await t.put('B-7', stay({ guestPhone: '+34 612 345 678', status: 'checked_out', checkInDate: '2001-01-01', checkOutDate: '2001-01-03' }));
    assert.deepEqual([out.attempts[0].lifecycleEventType, out.attempts[0].result, out.attempts[0].reason], ['post_checkout_review', 'skipped', 'event_disabled']);
  });

  test('an unexpected failure is an error attempt; the sync still commits and nothing is queued', async () => {
    const t = await pmsTenant(app);
    const wa = await t.sender();
    await t.setting({ eventType: 'booking_confirmed', enabled: true, channelId: wa });
    await app.admin('POST', `/tenants/${t.tenantId}/contacts`, { phone: GUEST_PHONE, consent: true });
    const outbound = app.runtime.services.outbound;
    const original = outbound.queue;
    // A failing SQL statement aborts a PostgreSQL transaction: the savepoint must recover it.
    outbound.queue = async (tx) => {
      await tx.query('SELECT * FROM no_such_table');
      throw new Error('unreachable');
    };
    try {
      const mirror = await t.put('E-1', stay({ guestPhone: GUEST_PHONE }));
      assert.deepEqual([mirror.attempts[0].result, mirror.attempts[0].reason], ['error', 'unexpected_error']);
    } finally {
      outbound.queue = original;
    }
    assert.equal((await t.list({ reservationId: 'E-1' })).mirrors[0].status, 'confirmed');
    const queued = await app.runtime.services.db.query('SELECT id FROM message_requests WHERE tenant_id = $1', [t.tenantId]);
    assert.equal(queued.length, 0);
    const conversations = await app.runtime.services.db.query('SELECT id FROM conversations WHERE tenant_id = $1', [t.tenantId]);
    assert.equal(conversations.length, 0, 'the failed evaluation left nothing behind');
  });
});

describe('pre_checkin schedule', () => {
  const clock = new ManualClock('2030-06-01T12:00:00.000Z');
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ clock, startWorkers: true });
  });
  after(() => app.close());

  /** Moves the clock, wakes the runner and waits until the hourly pass has run and rescheduled itself. */
  async function pass(at: string): Promise<void> {
    clock.set(at);
    app.runtime.runner.wake();
    await eventually(async () => {
      const rows = await app.runtime.services.db.query<{ id: number }>(
        `SELECT id FROM jobs WHERE task = 'reservations.pre_checkin' AND state = 'queued' AND run_at > $1`,
        [new Date(at)],
      );
      return rows.length > 0;
    }, 10_000, `pre_checkin pass at ${at}`);
  }

  test('due stays get would_send, later ones one deferred attempt until due (business timezone)', async () => {
    await pass('2030-06-01T12:00:00.000Z');
    const t = await pmsTenant(app);
    await app.admin('PATCH', `/tenants/${t.tenantId}/settings`, { timezone: 'Pacific/Auckland' });
    const wa = await t.sender('Reception');
    assert.equal((await t.setting({ eventType: 'pre_checkin', enabled: true, channelId: wa })).statusCode, 200);
    await app.admin('POST', `/tenants/${t.tenantId}/contacts`, { phone: GUEST_PHONE, consent: true });
    await t.put('SOON', stay({ guestPhone: GUEST_PHONE, checkInDate: '2030-06-02', checkOutDate: '2030-06-05' }));
    await t.put('LATER', stay({ guestPhone: GUEST_PHONE, checkInDate: '2030-06-10', checkOutDate: '2030-06-12' }));
    await t.put('OTHER', stay({ guestPhone: GUEST_PHONE, checkInDate: '2030-06-02', checkOutDate: '2030-06-05', status: 'cancelled' }));
    const preCheckin = async (id: string) => (await t.list({ reservationId: id })).mirrors[0].attempts.filter((a) => a.lifecycleEventType === 'pre_checkin');

    await pass('2030-06-01T13:00:00.000Z');
    const soon = await preCheckin('SOON');
    assert.deepEqual(soon.map((a) => [a.result, a.triggerSource]), [['would_send', 'schedule']]);
    const [request] = await app.runtime.services.db.query<{ text: string }>('SELECT text FROM message_requests WHERE id = $1', [soon[0].requestEventId]);
    assert.match(request.text, /look forward to welcoming you on 2030-06-02/);
    assert.deepEqual((await preCheckin('LATER')).map((a) => [a.result, a.reason]), [['deferred', 'not_due (due from 2030-06-08)']]);
    assert.deepEqual(await preCheckin('OTHER'), [], 'only confirmed stays');

    await pass('2030-06-05T12:00:00.000Z');
    assert.equal((await preCheckin('LATER')).length, 1, 'deferred is recorded once per check-in date');
    assert.equal((await preCheckin('SOON')).length, 1, 'a sent pre_checkin is not evaluated again');

    // 13:00 UTC on June 7 is already June 8 in Auckland: due by the business's own calendar.
    await pass('2030-06-07T13:00:00.000Z');
    const later = await preCheckin('LATER');
    assert.deepEqual(later.map((a) => a.result), ['would_send', 'deferred']);
    assert.equal(later[0].attemptCount, 2);
    const sends = await app.runtime.services.db.query('SELECT id FROM message_requests WHERE tenant_id = $1', [t.tenantId]);
    assert.equal(sends.length, 2);
  });
});
