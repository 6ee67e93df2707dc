import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import fastJson from 'fast-json-stringify';
import type { OpportunityRow } from '../../src/crm/repo.js';
import { OpportunityEnvelope, OpportunityList } from '../../src/crm/schema.js';
import { dereference } from '../../src/operations/shared-schemas.js';
import { iso } from '../../src/util/time.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// What an integrator finds with a key alone (decisions 7.4): leads and opportunities to follow up, the human
// handoff to read and resolve, and the lifecycle's attempts and receipts in the seed's 20-record pages.

let app: TestApp;
before(async () => {
  app = await startTestApp();
});
after(() => app.close());

/** The response serializer of an object schema (fast-json-stringify, as Fastify's). */
function serializerOf(schema: unknown): (body: unknown) => string {
  const isObjectSchema = (value: unknown): value is fastJson.ObjectSchema => typeof value === 'object' && value !== null && 'type' in value && value.type === 'object';
  if (!isObjectSchema(schema)) throw new Error('not an object schema');
  return fastJson(schema);
}

let phoneSeq = 0;
const nextPhone = (): string => `+5255${50_000_000 + ++phoneSeq}`;

function expectError(res: LightMyRequestResponse, status: number, code: string) {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as { error: { code: string; details: { issues?: Array<{ path: string }>; reason?: string } } };
  assert.equal(body.error.code, code, res.body);
  return body.error;
}
const paths = (res: LightMyRequestResponse) => (expectError(res, 400, 'M2M_INVALID_REQUEST').details.issues ?? []).map((issue) => issue.path);

function ok<T = Record<string, unknown>>(res: LightMyRequestResponse): T {
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as T;
}

async function guest(tenantId: string, channelId: string, name: string, phone = nextPhone()) {
  return app.admin<{ conversationId: string; contactId: string }>('POST', `/tenants/${tenantId}/inbound-messages`, { channelId, contact: { name, phone }, text: 'Hola' });
}

async function events(tenantId: string, prefix: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
  const rows = await app.runtime.services.db.query<{ body: string }>('SELECT body FROM webhook_events WHERE tenant_id = $1 AND type LIKE $2 ORDER BY created_at, id', [tenantId, `${prefix}%`]);
  return rows.map((row) => JSON.parse(row.body));
}

describe('leads and opportunities', () => {
  test('list newest first with filters, limits at both edges and cursors bound to filters; read one; foreign ids 404', async () => {
    const { tenantId, key } = await app.tenantWithKey(['crm:sales:read']);
    const other = await app.tenantWithKey(['crm:sales:read']);
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WA' });
    const ana = await guest(tenantId, channelId, 'Ana');
    const leads: string[] = [];
    for (let i = 0; i < 4; i++) {
      leads.push((await app.admin<{ leadId: string }>('POST', `/tenants/${tenantId}/leads`, { name: `Lead ${i}`, ...(i === 0 ? { conversationId: ana.conversationId, phone: '+52 55 6000 0001' } : {}) })).leadId);
    }
    const all = ok<{ leads: Array<{ leadId: string }>; hasMore: boolean }>(await app.api(key, 'GET', '/crm/leads'));
    assert.deepEqual(all.leads.map((l) => l.leadId), [...leads].reverse());
    assert.equal(all.hasMore, false);

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = ok<{ leads: Array<{ leadId: string }>; hasMore: boolean; nextCursor?: string }>(await app.api(key, 'GET', `/crm/leads?limit=1${cursor ? `&cursor=${cursor}` : ''}`));
      assert.equal(page.leads.length, 1);
      assert.equal(page.hasMore, page.nextCursor !== undefined);
      seen.push(page.leads[0].leadId);
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(seen, [...leads].reverse());
    const first = ok<{ nextCursor: string }>(await app.api(key, 'GET', '/crm/leads?limit=1'));
    expectError(await app.api(key, 'GET', `/crm/leads?limit=1&conversationId=${ana.conversationId}&cursor=${first.nextCursor}`), 400, 'M2M_INVALID_CURSOR');
    expectError(await app.api(other.key, 'GET', `/crm/leads?limit=1&cursor=${first.nextCursor}`), 400, 'M2M_INVALID_CURSOR');
    expectError(await app.api(key, 'GET', `/crm/leads?cursor=${first.nextCursor.slice(0, -2)}xx`), 400, 'M2M_INVALID_CURSOR');

    const lead = ok<{ leads: Array<Record<string, unknown>> }>(await app.api(key, 'GET', `/crm/leads?conversationId=${ana.conversationId}`)).leads;
    assert.equal(lead.length, 1);
    assert.deepEqual(Object.keys(lead[0]).sort(), ['conversationId', 'createdAt', 'leadId', 'name', 'phone', 'updatedAt']);
    assert.equal(lead[0].phone, '+525560000001');
    assert.equal(ok<{ leads: unknown[] }>(await app.api(key, 'GET', `/crm/leads?phone=${encodeURIComponent('+52 55 6000 0001')}`)).leads.length, 1);
    assert.deepEqual(paths(await app.api(key, 'GET', '/crm/leads?phone=12')), ['query.phone']);
    assert.deepEqual(paths(await app.api(key, 'GET', '/crm/leads?limit=0')), ['query.limit']);
    assert.deepEqual(paths(await app.api(key, 'GET', '/crm/leads?limit=201')), ['query.limit']);
    assert.equal(ok<{ leads: unknown[] }>(await app.api(key, 'GET', '/crm/leads?limit=200')).leads.length, 4);
    assert.deepEqual(paths(await app.api(key, 'GET', '/crm/leads?stage=quote')), ['query.stage']);
    assert.deepEqual(ok<{ lead: { leadId: string } }>(await app.api(key, 'GET', `/crm/leads/${leads[0]}`)).lead.leadId, leads[0]);
    expectError(await app.api(other.key, 'GET', `/crm/leads/${leads[0]}`), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(ok<{ leads: unknown[] }>(await app.api(other.key, 'GET', '/crm/leads')).leads, []);

    // Opportunities: two for Ana's lead (on her conversation), one for another lead.
    const o1 = await app.admin<{ opportunityId: string }>('POST', `/tenants/${tenantId}/opportunities`, { leadId: leads[0], stage: 'quote', status: 'open' });
    const o2 = await app.admin<{ opportunityId: string }>('POST', `/tenants/${tenantId}/opportunities`, { leadId: leads[0], stage: 'won', status: 'closed' });
    const o3 = await app.admin<{ opportunityId: string }>('POST', `/tenants/${tenantId}/opportunities`, { leadId: leads[1], stage: 'quote', status: 'open' });
    await app.admin('PATCH', `/tenants/${tenantId}/opportunities/${o1.opportunityId}`, { stage: 'negotiation' });
    const ids = (res: LightMyRequestResponse) => ok<{ opportunities: Array<{ opportunityId: string }> }>(res).opportunities.map((o) => o.opportunityId);
    assert.deepEqual(ids(await app.api(key, 'GET', '/crm/opportunities')), [o3.opportunityId, o2.opportunityId, o1.opportunityId]);
    assert.deepEqual(ids(await app.api(key, 'GET', `/crm/opportunities?leadId=${leads[0]}`)), [o2.opportunityId, o1.opportunityId]);
    assert.deepEqual(ids(await app.api(key, 'GET', `/crm/opportunities?conversationId=${ana.conversationId}`)), [o2.opportunityId, o1.opportunityId]);
    assert.deepEqual(ids(await app.api(key, 'GET', '/crm/opportunities?stage=quote')), [o3.opportunityId]);
    assert.deepEqual(ids(await app.api(key, 'GET', '/crm/opportunities?status=closed')), [o2.opportunityId]);
    const page = ok<{ opportunities: unknown[]; nextCursor: string; hasMore: boolean }>(await app.api(key, 'GET', '/crm/opportunities?limit=2'));
    assert.equal(page.hasMore, true);
    assert.deepEqual(ids(await app.api(key, 'GET', `/crm/opportunities?limit=2&cursor=${page.nextCursor}`)), [o1.opportunityId]);
    expectError(await app.api(key, 'GET', `/crm/opportunities?limit=2&stage=quote&cursor=${page.nextCursor}`), 400, 'M2M_INVALID_CURSOR');
    assert.deepEqual(paths(await app.api(key, 'GET', '/crm/opportunities?limit=0')), ['query.limit']);
    assert.deepEqual(paths(await app.api(key, 'GET', '/crm/opportunities?limit=201')), ['query.limit']);
    assert.deepEqual(paths(await app.api(key, 'GET', '/crm/opportunities?phone=1')), ['query.phone']);
    const one = ok<{ opportunity: Record<string, unknown> }>(await app.api(key, 'GET', `/crm/opportunities/${o1.opportunityId}`)).opportunity;
    assert.deepEqual({ ...one, createdAt: 0, updatedAt: 0 }, { opportunityId: o1.opportunityId, leadId: leads[0], conversationId: ana.conversationId, stage: 'negotiation', status: 'open', revision: 2, createdAt: 0, updatedAt: 0 });
    expectError(await app.api(other.key, 'GET', `/crm/opportunities/${o1.opportunityId}`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'GET', '/crm/opportunities/opp_missing'), 404, 'M2M_NOT_FOUND');

    // crm.opportunity.* events name the conversation when the opportunity has one.
    const emitted = await events(tenantId, 'crm.opportunity.');
    const ofO1 = emitted.filter((e) => e.data.opportunityId === o1.opportunityId);
    assert.deepEqual(ofO1.map((e) => [e.type, e.data.conversationId]), [['crm.opportunity.created', ana.conversationId], ['crm.opportunity.updated', ana.conversationId]]);
    assert.equal(emitted.find((e) => e.data.opportunityId === o3.opportunityId)?.data.conversationId, undefined);
  });
  test('opportunities are sent as stored: the bytes the schema\'s serializer writes, times as iso() prints them', async () => {
    const { tenantId, key } = await app.tenantWithKey(['crm:sales:read']);
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WA' });
    const ana = await guest(tenantId, channelId, 'Ana');
    const withConversation = await app.admin<{ leadId: string }>('POST', `/tenants/${tenantId}/leads`, { name: 'Ana', conversationId: ana.conversationId });
    const without = await app.admin<{ leadId: string }>('POST', `/tenants/${tenantId}/leads`, { name: 'Luis' });
    const created = [
      await app.admin<Record<string, unknown>>('POST', `/tenants/${tenantId}/opportunities`, { leadId: withConversation.leadId, stage: 'quote "A" \\ ñ \u0001\n', status: 'open' }),
      await app.admin<Record<string, unknown>>('POST', `/tenants/${tenantId}/opportunities`, { leadId: without.leadId, stage: 'won', status: 'closed' }),
      await app.admin<Record<string, unknown>>('POST', `/tenants/${tenantId}/opportunities`, { leadId: without.leadId, stage: 'lost', status: 'closed' }),
    ];
    assert.equal(created[0].conversationId, ana.conversationId);
    assert.equal(created[1].conversationId, undefined);
    // Times written by another hand: microseconds (dropped, as iso() drops them), another offset, before 1970.
    const db = app.runtime.services.db;
    await db.query(`UPDATE opportunities SET created_at = '2026-11-24 02:45:12.924561+00', updated_at = '2026-11-24 07:45:12.9+05:00' WHERE id = $1`, [created[1].opportunityId]);
    await db.query(`UPDATE opportunities SET created_at = '1969-07-20 20:17:40.5+00' WHERE id = $1`, [created[2].opportunityId]);
    await app.admin('PATCH', `/tenants/${tenantId}/opportunities/${created[0].opportunityId}`, { status: 'won' });

    const rows = await db.query<OpportunityRow>('SELECT * FROM opportunities WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC', [tenantId]);
    const expected = rows.map((row) => ({
      opportunityId: row.id,
      leadId: row.lead_id,
      ...(row.conversation_id ? { conversationId: row.conversation_id } : {}),
      stage: row.stage,
      status: row.status,
      revision: row.revision,
      createdAt: iso(row.created_at),
      updatedAt: iso(row.updated_at),
    }));
    assert.deepEqual(expected.map((o) => [o.createdAt, o.updatedAt]).slice(1), [
      ['2026-11-24T02:45:12.924Z', '2026-11-24T02:45:12.900Z'],
      ['1969-07-20T20:17:40.500Z', expected[2].updatedAt],
    ]);
    const serializeList = serializerOf(dereference(OpportunityList));
    const serializeOne = serializerOf(dereference(OpportunityEnvelope));
    const all = await app.api(key, 'GET', '/crm/opportunities');
    assert.deepEqual(ok(all), { opportunities: expected, hasMore: false });
    assert.equal(all.body, serializeList(JSON.parse(all.body)));
    const seen: unknown[] = [];
    let cursor: string | undefined;
    do {
      const res = await app.api(key, 'GET', `/crm/opportunities?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      const page = ok<{ opportunities: unknown[]; nextCursor?: string }>(res);
      assert.equal(res.body, serializeList(JSON.parse(res.body)));
      seen.push(...page.opportunities);
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(seen, expected);
    for (const opportunity of expected) {
      const res = await app.api(key, 'GET', `/crm/opportunities/${opportunity.opportunityId}`);
      assert.deepEqual(ok(res), { opportunity });
      assert.equal(res.body, serializeOne(JSON.parse(res.body)));
    }
  });
});

describe('handoff', () => {
  test('read the latest handoff; resolve once (409 the second time) without touching reviews, unread or needs-reply', async () => {
    const { tenantId, key } = await app.tenantWithKey(['conversations:handoffs:write', 'conversations:reviews:write', 'conversations:read']);
    const other = await app.tenantWithKey(['conversations:handoffs:write', 'conversations:read']);
    const { key: reader } = await app.tenantWithKey(['conversations:read']);
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WA' });
    const { conversationId } = await guest(tenantId, channelId, 'Luis');
    const operator = await app.admin<{ operatorId: string }>('POST', `/tenants/${tenantId}/operators`, { displayName: 'Lucía Pérez', email: 'lucia@example.com' });

    expectError(await app.api(key, 'GET', `/conversations/${conversationId}/handoff`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'POST', `/conversations/${conversationId}/handoff/resolve`, {}), 409, 'M2M_CONFLICT');
    await app.admin('POST', `/tenants/${tenantId}/conversations/${conversationId}/handoff`, { action: 'open', operatorId: operator.operatorId });
    const open = ok<{ handoff: Record<string, unknown> }>(await app.api(key, 'GET', `/conversations/${conversationId}/handoff`)).handoff;
    assert.equal(open.status, 'open');
    assert.equal(open.assignedOperatorId, operator.operatorId);
    assert.equal(open.assignedOperatorName, 'Lucía Pérez');
    assert.equal(open.resolvedAt, undefined);
    expectError(await app.api(other.key, 'GET', `/conversations/${conversationId}/handoff`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(other.key, 'POST', `/conversations/${conversationId}/handoff/resolve`, {}), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(reader, 'POST', `/conversations/${conversationId}/handoff/resolve`, {}), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.ok(paths(await app.api(key, 'POST', `/conversations/${conversationId}/handoff/resolve`, { resolutionNote: 'x'.repeat(2001) })).includes('body.resolutionNote'));
    assert.deepEqual(paths(await app.api(key, 'POST', `/conversations/${conversationId}/handoff/resolve`, { note: 'x' })), ['body.note']);

    const before = ok<{ unreadCount: number; needsReply: boolean }>(await app.api(key, 'GET', `/conversations/${conversationId}`));
    const resolved = ok<{ handoff: Record<string, unknown> }>(await app.api(key, 'POST', `/conversations/${conversationId}/handoff/resolve`, { resolutionNote: 'x'.repeat(2000) })).handoff;
    assert.equal(resolved.status, 'resolved');
    assert.equal(resolved.caseId, open.caseId);
    assert.equal(typeof resolved.resolvedAt, 'string');
    expectError(await app.api(key, 'POST', `/conversations/${conversationId}/handoff/resolve`, {}), 409, 'M2M_CONFLICT');
    const after = ok<{ unreadCount: number; needsReply: boolean; openHandoff: boolean }>(await app.api(key, 'GET', `/conversations/${conversationId}`));
    assert.deepEqual([after.unreadCount, after.needsReply, after.openHandoff], [before.unreadCount, before.needsReply, false]);
    assert.deepEqual(ok<{ handoff: Record<string, unknown> }>(await app.api(key, 'GET', `/conversations/${conversationId}/handoff`)).handoff, resolved);
    const updates = await events(tenantId, 'conversation.handoff.');
    assert.deepEqual(updates.map((e) => e.data.action), ['opened', 'resolved']);
    assert.deepEqual(updates[1].data, { conversationId, caseId: open.caseId, action: 'resolved' });

    // A review opened after the handoff is resolved stays open when a later handoff is resolved.
    assert.equal((await app.api(key, 'POST', `/conversations/${conversationId}/review`, {})).statusCode, 200);
    await app.admin('POST', `/tenants/${tenantId}/conversations/${conversationId}/handoff`, { action: 'open' });
    ok(await app.api(key, 'POST', `/conversations/${conversationId}/handoff/resolve`));
    assert.equal(ok<{ openReview: boolean }>(await app.api(key, 'GET', `/conversations/${conversationId}`)).openReview, true);
  });
});

describe('reservation attempts and lifecycle receipts', () => {
  test('20-record pages newest first with hasNext and nextCursor; filters; foreign ids 404', async () => {
    const { tenantId, key } = await app.tenantWithKey(['reservations:write']);
    const other = await app.tenantWithKey(['reservations:read']);
    const { integrationId } = await app.admin<{ integrationId: string }>('POST', `/tenants/${tenantId}/integrations`, { provider: 'pms', name: 'PMS' });
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WA', phoneNumber: '+34910000000' });
    assert.equal((await app.api(key, 'PUT', `/reservations/lifecycle-settings/${integrationId}`, { eventType: 'booking_confirmed', enabled: true, channelId })).statusCode, 200);
    const phone = nextPhone();
    await app.admin('POST', `/tenants/${tenantId}/contacts`, { phone, consent: true });
    const stay = { checkInDate: '2031-07-01', checkOutDate: '2031-07-04', bookedAt: '2031-01-01T10:00:00.000Z', guestFullName: 'Ana', guestPhone: phone };
    const sync = (id: string, status: string) => app.admin('PUT', `/tenants/${tenantId}/integrations/${integrationId}/reservations/${id}`, { ...stay, status });
    // 21 confirmations of one reservation: one would_send, then duplicates.
    for (let i = 0; i < 21; i++) {
      await sync('R-1', 'confirmed');
      await sync('R-1', 'tentative');
    }
    await sync('R-2', 'confirmed');

    type Attempts = { attempts: Array<{ result: string; attemptCount: number; requestEventId?: string }>; pageSize: number; hasNext: boolean; nextCursor?: string };
    const first = ok<Attempts>(await app.api(key, 'GET', `/reservations/${integrationId}/R-1/attempts`));
    assert.equal(first.pageSize, 20);
    assert.equal(first.attempts.length, 20);
    assert.equal(first.hasNext, true);
    assert.deepEqual(first.attempts.slice(0, 2).map((a) => a.attemptCount), [21, 20]);
    const second = ok<Attempts>(await app.api(key, 'GET', `/reservations/${integrationId}/R-1/attempts?cursor=${first.nextCursor}`));
    assert.deepEqual(second.attempts.map((a) => [a.attemptCount, a.result]), [[1, 'would_send']]);
    assert.equal(second.hasNext, false);
    assert.equal(second.nextCursor, undefined);
    expectError(await app.api(key, 'GET', `/reservations/${integrationId}/R-2/attempts?cursor=${first.nextCursor}`), 400, 'M2M_INVALID_CURSOR');
    expectError(await app.api(other.key, 'GET', `/reservations/${integrationId}/R-1/attempts`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'GET', `/reservations/${integrationId}/R-404/attempts`), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(paths(await app.api(key, 'GET', `/reservations/${integrationId}/R-1/attempts?limit=5`)), ['query.limit']);

    type Receipts = { receipts: Array<Record<string, unknown>>; pageSize: number; hasNext: boolean; nextCursor?: string };
    const receipts = ok<Receipts>(await app.api(key, 'GET', '/reservations/lifecycle-receipts'));
    assert.equal(receipts.pageSize, 20);
    assert.equal(receipts.hasNext, false);
    assert.deepEqual(receipts.receipts.map((r) => r.providerReservationId), ['R-2', 'R-1']);
    const [latest] = receipts.receipts;
    assert.deepEqual(Object.keys(latest).sort(), ['conversationId', 'createdAt', 'integrationId', 'lifecycleEventType', 'providerReservationId', 'requestEventId', 'status']);
    assert.equal(latest.status, 'queued');
    assert.equal(latest.lifecycleEventType, 'booking_confirmed');
    assert.equal(ok<Receipts>(await app.api(key, 'GET', `/reservations/lifecycle-receipts?integrationId=${integrationId}&eventType=booking_confirmed`)).receipts.length, 2);
    assert.equal(ok<Receipts>(await app.api(key, 'GET', '/reservations/lifecycle-receipts?eventType=pre_checkin')).receipts.length, 0);
    assert.deepEqual(ok<Receipts>(await app.api(other.key, 'GET', '/reservations/lifecycle-receipts')).receipts, []);
    expectError(await app.api(other.key, 'GET', `/reservations/lifecycle-receipts?integrationId=${integrationId}`), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(paths(await app.api(key, 'GET', '/reservations/lifecycle-receipts?eventType=checkout')), ['query.eventType']);
    assert.deepEqual(paths(await app.api(key, 'GET', '/reservations/lifecycle-receipts?limit=20')), ['query.limit']);
    expectError(await app.api(key, 'GET', '/reservations/lifecycle-receipts?cursor=abc.def'), 400, 'M2M_INVALID_CURSOR');
  });
});
