import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import type { Clock } from '../../src/clock.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';
import { addKey, createSubscription, expectError, issuesOf } from '../fixtures/webhooks.js';

// CRM over the public API: opportunities (admin writes, crm.opportunity.* events), follow-ups (create,
// read, list, edit, dismiss, cancel, send through one claim) and the automation settings. Workers run,
// so queued sends go through the sandbox pipeline and the automation job can reconcile a send whose
// CRM completion failed.

const SCOPES = ['crm:followups:write', 'crm:automation:write', 'messages:read'];
const DAY = 24 * 60 * 60 * 1000;

/** Real time plus an offset the tests can move forward, never the same millisecond twice. */
class TestClock implements Clock {
  private offset = 0;
  private last = 0;
  now(): Date {
    this.last = Math.max(Date.now() + this.offset, this.last + 1);
    return new Date(this.last);
  }
  advance(ms: number): void {
    this.offset += ms;
  }
}

interface FollowUp {
  followUpId: string;
  leadId: string;
  status: string;
  mode: string;
  opportunityId?: string;
  conversationId: string;
  channel: string;
  reasonCode: string;
  reasonText?: string;
  reason: string;
  messageDraft?: string;
  draftStatus: string;
  dueAt?: string;
  expiresAt: string;
  sentAt?: string;
  replyId?: string;
  createdAt: string;
  updatedAt: string;
}

interface SendBody {
  followUp: FollowUp;
  reply: { replyId: string; requestEventId: string; conversationId: string; status: string };
  crmStatusUpdateFailed?: boolean;
}

interface ListBody {
  followUps: FollowUp[];
  nextCursor?: string;
  hasMore: boolean;
}

interface Opportunity {
  opportunityId: string;
  leadId: string;
  conversationId?: string;
  stage: string;
  status: string;
  revision: number;
  createdAt: string;
  updatedAt: string;
}

/** A guest: contact, conversation and the lead that points at it. */
interface Guest {
  contactId: string;
  conversationId: string;
  leadId: string;
}

interface World extends Guest {
  tenantId: string;
  key: string;
  channelId: string;
  opportunityId: string;
}

let phoneSeq = 0;
const nextPhone = (): string => `+5255${30_000_000 + ++phoneSeq}`;

let app: TestApp;
const clock = new TestClock();

before(async () => {
  app = await startTestApp({ clock, startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
});
after(() => app.close());

const db = () => app.runtime.services.db;

async function count(sql: string, params: unknown[]): Promise<number> {
  const [row] = await db().query<{ n: number }>(sql, params);
  return row.n;
}

/** Message requests and outbound messages of a tenant: what a send creates. */
async function sends(tenantId: string): Promise<{ requests: number; messages: number }> {
  return {
    requests: await count('SELECT count(*)::int AS n FROM message_requests WHERE tenant_id = $1', [tenantId]),
    messages: await count(`SELECT count(*)::int AS n FROM messages WHERE tenant_id = $1 AND direction = 'outbound'`, [tenantId]),
  };
}

/** A guest writes in on the channel (consenting unless told otherwise) and becomes a lead. */
async function addGuest(tenantId: string, channelId: string, options: { consent?: boolean; name?: string } = {}): Promise<Guest> {
  const inbound = await app.admin<{ conversationId: string; contactId: string }>('POST', `/tenants/${tenantId}/inbound-messages`, {
    channelId,
    contact: { name: options.name ?? 'Ana López', phone: nextPhone() },
    text: 'Hola, ¿tienen disponibilidad en marzo?',
  });
  if (options.consent !== false) await app.admin('PATCH', `/tenants/${tenantId}/contacts/${inbound.contactId}`, { consent: true });
  const lead = await app.admin<{ leadId: string }>('POST', `/tenants/${tenantId}/leads`, { name: options.name ?? 'Ana López', conversationId: inbound.conversationId });
  return { contactId: inbound.contactId, conversationId: inbound.conversationId, leadId: lead.leadId };
}

/** Tenant + key, a WhatsApp channel, one consenting guest with a lead and an open opportunity. */
async function setupWorld(options: { scopes?: string[]; timezone?: string } = {}): Promise<World> {
  const tenant = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'Hotel Sol', ...(options.timezone ? { timezone: options.timezone } : {}) });
  const { key } = await addKey(app, tenant.tenantId, options.scopes ?? SCOPES, 'crm');
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp line' });
  const guest = await addGuest(tenant.tenantId, channelId);
  const opportunity = await app.admin<Opportunity>('POST', `/tenants/${tenant.tenantId}/opportunities`, { leadId: guest.leadId, stage: 'quote', status: 'open' });
  return { tenantId: tenant.tenantId, key, channelId, opportunityId: opportunity.opportunityId, ...guest };
}

function createRaw(world: World, body: Record<string, unknown> = {}, key = world.key) {
  return app.api(key, 'POST', '/crm/follow-ups', { leadId: world.leadId, conversationId: world.conversationId, ...body });
}

async function createFollowUp(world: World, body: Record<string, unknown> = {}): Promise<FollowUp> {
  const response = await createRaw(world, body);
  assert.equal(response.statusCode, 201, response.body);
  return (response.json() as { followUp: FollowUp }).followUp;
}

async function getFollowUp(world: World, id: string): Promise<FollowUp> {
  const response = await app.api(world.key, 'GET', `/crm/follow-ups/${id}`);
  assert.equal(response.statusCode, 200, response.body);
  return (response.json() as { followUp: FollowUp }).followUp;
}

function send(world: World, id: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return app.api(world.key, 'POST', `/crm/follow-ups/${id}/send`, body, headers);
}

async function sendOk(world: World, id: string, body: Record<string, unknown> = {}): Promise<SendBody> {
  const response = await send(world, id, body);
  assert.equal(response.statusCode, 202, response.body);
  return response.json() as SendBody;
}

function list(world: World, query = ''): Promise<LightMyRequestResponse> {
  return app.api(world.key, 'GET', `/crm/follow-ups${query ? `?${query}` : ''}`);
}

async function listOk(world: World, query = ''): Promise<ListBody> {
  const response = await list(world, query);
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as ListBody;
}

async function settingsOf(world: { key: string }): Promise<Record<string, unknown>> {
  const response = await app.api(world.key, 'GET', '/crm/follow-up-settings');
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as Record<string, unknown>;
}

function patchSettings(world: { key: string }, body: unknown) {
  return app.api(world.key, 'PATCH', '/crm/follow-up-settings', body);
}

async function events(tenantId: string, prefix: string): Promise<Array<{ type: string; data: Record<string, unknown>; tenantId: string; schemaVersion: string }>> {
  const rows = await db().query<{ body: string }>(`SELECT body FROM webhook_events WHERE tenant_id = $1 AND type LIKE $2 ORDER BY created_at, id`, [tenantId, `${prefix}%`]);
  return rows.map((row) => JSON.parse(row.body));
}

const sortedKeys = (value: object) => Object.keys(value).sort();
/** The distinct paths named by a 400's issues (a union type may report one path several times). */
const paths = (response: LightMyRequestResponse) => [...new Set(issuesOf(response).map((i) => i.path))];
const isIso = (value: unknown) => typeof value === 'string' && !Number.isNaN(Date.parse(value)) && new Date(value).toISOString() === value;

describe('opportunities', () => {
  test('create is 201 with revision 1; every PATCH bumps the revision; created/updated events carry the ids, revision, stage and status', async () => {
    const world = await setupWorld();
    const created = await app.adminRaw('POST', `/tenants/${world.tenantId}/opportunities`, { leadId: world.leadId, stage: 'lead', status: 'open' });
    assert.equal(created.statusCode, 201, created.body);
    const opportunity = created.json() as Opportunity;
    assert.match(opportunity.opportunityId, /^opp_/);
    assert.equal(opportunity.revision, 1);
    assert.equal(opportunity.leadId, world.leadId);
    assert.equal(opportunity.stage, 'lead');
    assert.equal(opportunity.status, 'open');
    assert.equal(opportunity.conversationId, world.conversationId, "the lead's conversation is used when none is given");
    assert.ok(isIso(opportunity.createdAt) && isIso(opportunity.updatedAt));

    const url = `/tenants/${world.tenantId}/opportunities/${opportunity.opportunityId}`;
    const second = await app.admin<Opportunity>('PATCH', url, { stage: 'quote' });
    assert.equal(second.revision, 2);
    assert.equal(second.stage, 'quote');
    assert.equal(second.status, 'open');
    const third = await app.admin<Opportunity>('PATCH', url, { status: 'won' });
    assert.equal(third.revision, 3);
    assert.equal(third.stage, 'quote');
    assert.equal(third.status, 'won');
    const fourth = await app.admin<Opportunity>('PATCH', url, { stage: 'closed', status: 'won' });
    assert.equal(fourth.revision, 4);

    const own = (await events(world.tenantId, 'crm.opportunity.')).filter((e) => e.data.opportunityId === opportunity.opportunityId);
    assert.deepEqual(
      own.map((e) => [e.type, e.data.revision, e.data.stage, e.data.status]),
      [
        ['crm.opportunity.created', 1, 'lead', 'open'],
        ['crm.opportunity.updated', 2, 'quote', 'open'],
        ['crm.opportunity.updated', 3, 'quote', 'won'],
        ['crm.opportunity.updated', 4, 'closed', 'won'],
      ],
    );
    for (const event of own) {
      assert.equal(event.tenantId, world.tenantId);
      assert.equal(event.schemaVersion, '1.0');
      assert.equal(event.data.leadId, world.leadId);
    }
  });

  test('PATCH {} is 400; unknown lead, foreign lead and unknown opportunity are 404', async () => {
    const world = await setupWorld();
    const other = await setupWorld();
    const empty = await app.adminRaw('PATCH', `/tenants/${world.tenantId}/opportunities/${world.opportunityId}`, {});
    assert.equal(empty.statusCode, 400, empty.body);
    assert.equal(empty.json().error.code, 'M2M_INVALID_REQUEST');
    const extra = await app.adminRaw('PATCH', `/tenants/${world.tenantId}/opportunities/${world.opportunityId}`, { stage: 'x', colour: 'red' });
    assert.equal(extra.statusCode, 400);

    const unknownLead = await app.adminRaw('POST', `/tenants/${world.tenantId}/opportunities`, { leadId: 'lead_missing', stage: 'lead', status: 'open' });
    assert.equal(unknownLead.statusCode, 404, unknownLead.body);
    assert.equal(unknownLead.json().error.code, 'M2M_NOT_FOUND');
    const foreignLead = await app.adminRaw('POST', `/tenants/${world.tenantId}/opportunities`, { leadId: other.leadId, stage: 'lead', status: 'open' });
    assert.equal(foreignLead.statusCode, 404);
    const unknown = await app.adminRaw('PATCH', `/tenants/${world.tenantId}/opportunities/opp_missing`, { stage: 'quote' });
    assert.equal(unknown.statusCode, 404);
    const foreign = await app.adminRaw('PATCH', `/tenants/${world.tenantId}/opportunities/${other.opportunityId}`, { stage: 'quote' });
    assert.equal(foreign.statusCode, 404);
    assert.equal((await events(world.tenantId, 'crm.opportunity.updated')).length, 0, 'refused changes emit nothing');
  });

  test('opportunity events reach a subscriber whose key holds crm:sales:read; one without it cannot subscribe', async () => {
    const world = await setupWorld({ scopes: [...SCOPES, 'crm:sales:read', 'webhooks:write'] });
    const hook = await startReceiver();
    try {
      const withoutScope = await addKey(app, world.tenantId, ['webhooks:write', 'messages:read']);
      const refused = await app.api(withoutScope.key, 'POST', '/webhooks', { url: hook.url, events: ['crm.opportunity.created'] });
      expectError(refused, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(refused.json().error.details.missingScopes, ['crm:sales:read']);

      await createSubscription(app, world.key, { url: hook.url, events: ['crm.opportunity.created', 'crm.opportunity.updated'] });
      const opportunity = await app.admin<Opportunity>('POST', `/tenants/${world.tenantId}/opportunities`, { leadId: world.leadId, stage: 'lead', status: 'open' });
      await app.admin('PATCH', `/tenants/${world.tenantId}/opportunities/${opportunity.opportunityId}`, { stage: 'quote' });
      const bodies = await eventually(async () => {
        const got = hook.received.map((r) => JSON.parse(r.body) as { type: string; data: Record<string, unknown> });
        return got.length >= 2 ? got : undefined;
      }, 20_000, 'two opportunity deliveries');
      const byType = new Map(bodies.map((b) => [b.type, b.data]));
      assert.deepEqual(byType.get('crm.opportunity.created'), { opportunityId: opportunity.opportunityId, leadId: world.leadId, conversationId: world.conversationId, revision: 1, stage: 'lead', status: 'open' });
      const updated = byType.get('crm.opportunity.updated');
      assert.ok(updated);
      assert.equal(updated.opportunityId, opportunity.opportunityId);
      assert.equal(updated.leadId, world.leadId);
      assert.equal(updated.revision, 2);
      assert.equal(updated.stage, 'quote');
      assert.equal(updated.status, 'open');
    } finally {
      await hook.close();
    }
  });
});

describe('follow-up create and read', () => {
  test('create is 201 {followUp} with every field that has a value, and nothing else', async () => {
    const world = await setupWorld();
    const response = await createRaw(world);
    assert.equal(response.statusCode, 201, response.body);
    const body = response.json() as { followUp: FollowUp };
    assert.deepEqual(Object.keys(body), ['followUp']);
    const followUp = body.followUp;
    assert.deepEqual(sortedKeys(followUp), [
      'channel', 'conversationId', 'createdAt', 'draftStatus', 'expiresAt', 'followUpId', 'leadId', 'mode', 'opportunityId', 'reason', 'reasonCode', 'status', 'updatedAt',
    ]);
    assert.match(followUp.followUpId, /^fu_/);
    assert.equal(followUp.leadId, world.leadId);
    assert.equal(followUp.status, 'pending');
    assert.equal(followUp.mode, 'draft');
    assert.equal(followUp.opportunityId, world.opportunityId);
    assert.equal(followUp.conversationId, world.conversationId);
    assert.equal(followUp.channel, 'whatsapp');
    assert.equal(followUp.reasonCode, 'other');
    assert.equal(typeof followUp.reason, 'string');
    assert.ok(followUp.reason.length > 0);
    assert.equal(followUp.draftStatus, 'empty');
    for (const field of ['expiresAt', 'createdAt', 'updatedAt'] as const) assert.ok(isIso(followUp[field]), `${field} ${followUp[field]}`);
    assert.ok(Date.parse(followUp.expiresAt) > Date.parse(followUp.createdAt));
  });

  test('with dueAt, draft, reasonCode and reasonText: scheduled, draft edited, reason is the text', async () => {
    const world = await setupWorld();
    const dueAt = new Date(clock.now().getTime() + 2 * DAY);
    const followUp = await createFollowUp(world, { dueAt: dueAt.toISOString(), messageDraft: 'Hola Ana, ¿pudo ver la cotización?', reasonCode: 'quote_sent', reasonText: 'Quote for March' });
    assert.deepEqual(sortedKeys(followUp), [
      'channel', 'conversationId', 'createdAt', 'draftStatus', 'dueAt', 'expiresAt', 'followUpId', 'leadId', 'messageDraft', 'mode', 'opportunityId', 'reason', 'reasonCode', 'reasonText', 'status', 'updatedAt',
    ]);
    assert.equal(followUp.status, 'scheduled');
    assert.equal(followUp.dueAt, dueAt.toISOString());
    assert.equal(followUp.messageDraft, 'Hola Ana, ¿pudo ver la cotización?');
    assert.equal(followUp.draftStatus, 'edited');
    assert.equal(followUp.reasonCode, 'quote_sent');
    assert.equal(followUp.reasonText, 'Quote for March');
    assert.equal(followUp.reason, 'Quote for March');
    assert.ok(Date.parse(followUp.expiresAt) > dueAt.getTime(), 'a follow-up does not expire before it is due');

    const offset = await createFollowUp(world, { dueAt: '2030-01-02T10:00:00+02:00' });
    assert.equal(offset.dueAt, '2030-01-02T08:00:00.000Z', 'dueAt is normalised to UTC');
  });

  test('a lead without an opportunity gives a follow-up without opportunityId; mode follows the settings at creation', async () => {
    const world = await setupWorld();
    const guest = await addGuest(world.tenantId, world.channelId, { name: 'Luis' });
    const followUp = await createFollowUp({ ...world, ...guest });
    assert.equal(followUp.opportunityId, undefined);
    assert.equal(followUp.leadId, guest.leadId);

    const patched = await patchSettings(world, { followUpMode: 'auto' });
    assert.equal(patched.statusCode, 200, patched.body);
    const auto = await createFollowUp(world);
    assert.equal(auto.mode, 'auto');
    assert.equal(auto.status, 'pending');
  });

  test('unknown, foreign or mismatched lead and conversation', async () => {
    const world = await setupWorld();
    const other = await setupWorld();
    const unknownLead = await createRaw(world, { leadId: 'lead_missing' });
    expectError(unknownLead, 404, 'M2M_NOT_FOUND');
    const unknownConversation = await createRaw(world, { conversationId: 'conv_missing' });
    expectError(unknownConversation, 404, 'M2M_NOT_FOUND');
    expectError(await createRaw(world, { leadId: other.leadId }), 404, 'M2M_NOT_FOUND');
    expectError(await createRaw(world, { conversationId: other.conversationId }), 404, 'M2M_NOT_FOUND');
    // Another conversation of the same tenant is not this lead's conversation.
    const guest = await addGuest(world.tenantId, world.channelId);
    const mismatch = await createRaw(world, { conversationId: guest.conversationId });
    assert.deepEqual(paths(mismatch), ['body.conversationId']);
    assert.equal((await listOk(world)).followUps.length, 0, 'nothing was created');
  });

  test('invalid bodies are 400 naming the field', async () => {
    const world = await setupWorld();
    assert.deepEqual(paths(await createRaw(world, { dueAt: 'tomorrow' })), ['body.dueAt']);
    assert.deepEqual(paths(await createRaw(world, { reasonCode: 'price_drop' })), ['body.reasonCode']);
    assert.deepEqual(issuesOf(await createRaw(world, { colour: 'red' })), [{ path: 'body.colour', message: 'unknown property' }]);
    assert.deepEqual(issuesOf(await app.api(world.key, 'POST', '/crm/follow-ups', { conversationId: world.conversationId })), [{ path: 'body.leadId', message: 'is required' }]);
    assert.deepEqual(paths(await createRaw(world, { messageDraft: '' })), ['body.messageDraft']);
    assert.deepEqual(paths(await createRaw(world, { dueAt: 1767225600 })), ['body.dueAt']);
  });

  test('read is 200 with the same record; foreign and unknown ids are 404; an id of 201 characters is 400', async () => {
    const world = await setupWorld();
    const other = await setupWorld();
    const created = await createFollowUp(world, { reasonCode: 'no_reply' });
    const read = await app.api(world.key, 'GET', `/crm/follow-ups/${created.followUpId}`);
    assert.equal(read.statusCode, 200);
    assert.deepEqual(read.json(), { followUp: created });

    const foreign = await app.api(other.key, 'GET', `/crm/follow-ups/${created.followUpId}`);
    const unknown = await app.api(other.key, 'GET', '/crm/follow-ups/fu_missing');
    expectError(foreign, 404, 'M2M_NOT_FOUND');
    expectError(unknown, 404, 'M2M_NOT_FOUND');
    assert.deepEqual(foreign.json(), { error: { ...unknown.json().error } }, 'a foreign follow-up looks exactly like a missing one');

    expectError(await app.api(world.key, 'GET', `/crm/follow-ups/${'f'.repeat(200)}`), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(paths(await app.api(world.key, 'GET', `/crm/follow-ups/${'f'.repeat(201)}`)), ['params.followUpId']);
    assert.deepEqual(paths(await app.api(world.key, 'PATCH', `/crm/follow-ups/${'f'.repeat(201)}`, { messageDraft: 'x' })), ['params.followUpId']);
    assert.equal(issuesOf(await send(world, 'f'.repeat(201))).length, 1);
  });

  test('scopes: list and read need crm:followups:read (write implies it); changes need crm:followups:write', async () => {
    const world = await setupWorld();
    const created = await createFollowUp(world);
    const reader = await addKey(app, world.tenantId, ['crm:followups:read']);
    assert.equal((await app.api(reader.key, 'GET', '/crm/follow-ups')).statusCode, 200);
    assert.equal((await app.api(reader.key, 'GET', `/crm/follow-ups/${created.followUpId}`)).statusCode, 200);
    const calls: Array<[string, string, unknown]> = [
      ['POST', '/crm/follow-ups', { leadId: world.leadId, conversationId: world.conversationId }],
      ['PATCH', `/crm/follow-ups/${created.followUpId}`, { messageDraft: 'x' }],
      ['POST', `/crm/follow-ups/${created.followUpId}/dismiss`, {}],
      ['POST', `/crm/follow-ups/${created.followUpId}/cancel`, {}],
      ['POST', `/crm/follow-ups/${created.followUpId}/send`, {}],
    ];
    for (const [method, url, body] of calls) {
      const refused = await app.api(reader.key, method, url, body);
      const error = expectError(refused, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(error.details, { requiredScopes: ['crm:followups:write'], missingScopes: ['crm:followups:write'] }, `${method} ${url}`);
    }
    const stranger = await addKey(app, world.tenantId, ['messages:read']);
    const error = expectError(await app.api(stranger.key, 'GET', '/crm/follow-ups'), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.deepEqual(error.details.requiredScopes, ['crm:followups:read']);
    assert.equal((await getFollowUp(world, created.followUpId)).status, 'pending', 'refused calls changed nothing');
  });
});

describe('follow-up list', () => {
  test('newest first; default page 50 with hasMore and nextCursor; the cursor continues without overlap; limit 200 is the maximum', async () => {
    const world = await setupWorld();
    const ids: string[] = [];
    for (let i = 0; i < 55; i++) ids.push((await createFollowUp(world)).followUpId);
    const first = await listOk(world);
    assert.equal(first.followUps.length, 50);
    assert.equal(first.hasMore, true);
    assert.ok(first.nextCursor && first.nextCursor.length <= 400);
    assert.deepEqual(sortedKeys(first), ['followUps', 'hasMore', 'nextCursor']);
    assert.deepEqual(first.followUps.map((f) => f.followUpId), ids.slice().reverse().slice(0, 50), 'newest first');

    const second = await listOk(world, `cursor=${encodeURIComponent(first.nextCursor)}`);
    assert.equal(second.followUps.length, 5);
    assert.equal(second.hasMore, false);
    assert.equal(second.nextCursor, undefined);
    assert.deepEqual(sortedKeys(second), ['followUps', 'hasMore']);
    assert.deepEqual([...first.followUps, ...second.followUps].map((f) => f.followUpId), ids.slice().reverse());

    const small = await listOk(world, 'limit=20');
    assert.equal(small.followUps.length, 20);
    const next = await listOk(world, `limit=40&cursor=${encodeURIComponent(small.nextCursor!)}`);
    assert.equal(next.followUps.length, 35, 'the page size may change between pages');
    assert.equal(next.hasMore, false);

    const all = await listOk(world, 'limit=200');
    assert.equal(all.followUps.length, 55);
    assert.equal(all.hasMore, false);
    assert.deepEqual(paths(await list(world, 'limit=201')), ['query.limit']);
    assert.deepEqual(paths(await list(world, 'limit=0')), ['query.limit']);

    const other = await setupWorld();
    assert.deepEqual((await listOk(other)).followUps, [], "another tenant's follow-ups are invisible");
  });

  test('filters: status, mode, leadId, conversationId, dueAfter', async () => {
    const world = await setupWorld();
    const guest = await addGuest(world.tenantId, world.channelId, { name: 'Luis' });
    const guestWorld = { ...world, ...guest };
    const now = clock.now().getTime();
    const pending = await createFollowUp(world);
    const soon = await createFollowUp(world, { dueAt: new Date(now + DAY).toISOString() });
    const later = await createFollowUp(guestWorld, { dueAt: new Date(now + 3 * DAY).toISOString() });
    const dismissed = await createFollowUp(guestWorld);
    assert.equal((await app.api(world.key, 'POST', `/crm/follow-ups/${dismissed.followUpId}/dismiss`, {})).statusCode, 200);
    await patchSettings(world, { followUpMode: 'auto' });
    const auto = await createFollowUp(guestWorld);
    await patchSettings(world, { followUpMode: 'off' });

    const ids = async (query: string) => (await listOk(world, query)).followUps.map((f) => f.followUpId).sort();
    const sorted = (...items: FollowUp[]) => items.map((f) => f.followUpId).sort();
    assert.deepEqual(await ids('status=pending'), sorted(pending, auto));
    assert.deepEqual(await ids('status=scheduled'), sorted(soon, later));
    assert.deepEqual(await ids('status=dismissed'), sorted(dismissed));
    assert.deepEqual(await ids('status=sent'), []);
    assert.deepEqual(await ids('mode=auto'), sorted(auto));
    assert.deepEqual(await ids('mode=draft'), sorted(pending, soon, later, dismissed));
    assert.deepEqual(await ids(`leadId=${world.leadId}`), sorted(pending, soon));
    assert.deepEqual(await ids(`conversationId=${guest.conversationId}`), sorted(later, dismissed, auto));
    assert.deepEqual(await ids(`dueAfter=${encodeURIComponent(new Date(now + 2 * DAY).toISOString())}`), sorted(later));
    assert.deepEqual(await ids(`dueAfter=${encodeURIComponent(new Date(now).toISOString())}`), sorted(soon, later));
    assert.deepEqual(await ids(`status=scheduled&leadId=${guest.leadId}`), sorted(later));
    assert.deepEqual(await ids('leadId=lead_missing'), []);

    for (const query of ['status=bogus', 'mode=manual', 'dueAfter=tomorrow', 'owner=mine', `leadId=${'x'.repeat(201)}`]) {
      const name = query.split('=')[0];
      assert.deepEqual(paths(await list(world, query)), [`query.${name}`], query);
    }
  });

  test('a cursor is bound to its filters: a changed filter, a tampered or foreign cursor is 400 M2M_INVALID_CURSOR', async () => {
    const world = await setupWorld();
    for (let i = 0; i < 3; i++) await createFollowUp(world);
    const first = await listOk(world, 'limit=1&status=pending');
    assert.ok(first.nextCursor);
    const cursor = encodeURIComponent(first.nextCursor);
    assert.equal((await listOk(world, `limit=1&status=pending&cursor=${cursor}`)).followUps.length, 1);
    expectError(await list(world, `limit=1&cursor=${cursor}`), 400, 'M2M_INVALID_CURSOR');
    expectError(await list(world, `limit=1&status=scheduled&cursor=${cursor}`), 400, 'M2M_INVALID_CURSOR');
    expectError(await list(world, `limit=1&status=pending&mode=draft&cursor=${cursor}`), 400, 'M2M_INVALID_CURSOR');
    expectError(await list(world, `limit=1&status=pending&cursor=${cursor.slice(0, -2)}xx`), 400, 'M2M_INVALID_CURSOR');
    expectError(await list(world, 'status=pending&cursor=not-a-cursor'), 400, 'M2M_INVALID_CURSOR');
    const other = await setupWorld();
    expectError(await list(other, `limit=1&status=pending&cursor=${cursor}`), 400, 'M2M_INVALID_CURSOR');
  });
});

describe('follow-up edit, dismiss and cancel', () => {
  test('PATCH: messageDraft makes the draft edited; dueAt schedules; dueAt null makes it pending again', async () => {
    const world = await setupWorld();
    const created = await createFollowUp(world);
    const url = `/crm/follow-ups/${created.followUpId}`;

    const drafted = await app.api(world.key, 'PATCH', url, { messageDraft: 'Hola Ana, ¿seguimos con la reserva?' });
    assert.equal(drafted.statusCode, 200, drafted.body);
    const afterDraft = (drafted.json() as { followUp: FollowUp }).followUp;
    assert.equal(afterDraft.messageDraft, 'Hola Ana, ¿seguimos con la reserva?');
    assert.equal(afterDraft.draftStatus, 'edited');
    assert.equal(afterDraft.status, 'pending');
    assert.ok(Date.parse(afterDraft.updatedAt) > Date.parse(created.updatedAt));
    assert.equal(afterDraft.createdAt, created.createdAt);

    const dueAt = new Date(clock.now().getTime() + DAY).toISOString();
    const scheduled = (await app.api(world.key, 'PATCH', url, { dueAt })).json() as { followUp: FollowUp };
    assert.equal(scheduled.followUp.status, 'scheduled');
    assert.equal(scheduled.followUp.dueAt, dueAt);
    assert.equal(scheduled.followUp.messageDraft, 'Hola Ana, ¿seguimos con la reserva?', 'only supplied fields change');

    const cleared = (await app.api(world.key, 'PATCH', url, { dueAt: null })).json() as { followUp: FollowUp };
    assert.equal(cleared.followUp.status, 'pending');
    assert.equal(cleared.followUp.dueAt, undefined);
    assert.ok(!('dueAt' in cleared.followUp));

    const both = (await app.api(world.key, 'PATCH', url, { dueAt, messageDraft: 'Otra versión' })).json() as { followUp: FollowUp };
    assert.equal(both.followUp.status, 'scheduled');
    assert.equal(both.followUp.messageDraft, 'Otra versión');
    assert.deepEqual(await getFollowUp(world, created.followUpId), both.followUp);

    assert.deepEqual(issuesOf(await app.api(world.key, 'PATCH', url, {})).length, 1, 'an empty body is 400');
    assert.deepEqual(issuesOf(await app.api(world.key, 'PATCH', url, { status: 'sent' })), [{ path: 'body.status', message: 'unknown property' }]);
    assert.deepEqual(paths(await app.api(world.key, 'PATCH', url, { dueAt: 'tomorrow' })), ['body.dueAt']);
    expectError(await app.api(world.key, 'PATCH', '/crm/follow-ups/fu_missing', { messageDraft: 'x' }), 404, 'M2M_NOT_FOUND');
    const other = await setupWorld();
    expectError(await app.api(other.key, 'PATCH', url, { messageDraft: 'x' }), 404, 'M2M_NOT_FOUND');
    assert.deepEqual(await getFollowUp(world, created.followUpId), both.followUp, 'refused edits changed nothing');
  });

  test('dismiss and cancel (optional feedbackReason) are final; a second close or an edit is 409', async () => {
    const world = await setupWorld();
    const a = await createFollowUp(world, { dueAt: new Date(clock.now().getTime() + DAY).toISOString() });
    const b = await createFollowUp(world);
    const c = await createFollowUp(world);
    const d = await createFollowUp(world);

    const dismissed = await app.api(world.key, 'POST', `/crm/follow-ups/${a.followUpId}/dismiss`, { feedbackReason: 'The guest already booked' });
    assert.equal(dismissed.statusCode, 200, dismissed.body);
    assert.equal((dismissed.json() as { followUp: FollowUp }).followUp.status, 'dismissed');
    const canceled = await app.api(world.key, 'POST', `/crm/follow-ups/${b.followUpId}/cancel`, { feedbackReason: 'Wrong guest' });
    assert.equal(canceled.statusCode, 200, canceled.body);
    assert.equal((canceled.json() as { followUp: FollowUp }).followUp.status, 'canceled');
    // The body is optional: an empty object and no body at all both work.
    assert.equal((await app.api(world.key, 'POST', `/crm/follow-ups/${c.followUpId}/dismiss`, {})).statusCode, 200);
    const noBody = await app.api(world.key, 'POST', `/crm/follow-ups/${d.followUpId}/cancel`);
    assert.equal(noBody.statusCode, 200, noBody.body);
    assert.equal((noBody.json() as { followUp: FollowUp }).followUp.status, 'canceled');

    for (const [id, status] of [[a.followUpId, 'dismissed'], [b.followUpId, 'canceled']] as const) {
      for (const action of ['dismiss', 'cancel']) {
        const again = await app.api(world.key, 'POST', `/crm/follow-ups/${id}/${action}`, {});
        expectError(again, 409, 'M2M_CONFLICT');
      }
      expectError(await app.api(world.key, 'PATCH', `/crm/follow-ups/${id}`, { messageDraft: 'x' }), 409, 'M2M_CONFLICT');
      expectError(await app.api(world.key, 'PATCH', `/crm/follow-ups/${id}`, { dueAt: null }), 409, 'M2M_CONFLICT');
      assert.equal((await getFollowUp(world, id)).status, status);
    }
    assert.deepEqual(paths(await app.api(world.key, 'POST', `/crm/follow-ups/${c.followUpId}/cancel`, { feedbackReason: '' })), ['body.feedbackReason']);
    assert.deepEqual(paths(await app.api(world.key, 'POST', `/crm/follow-ups/${c.followUpId}/cancel`, { reason: 'x' })), ['body.reason']);
    expectError(await app.api(world.key, 'POST', '/crm/follow-ups/fu_missing/dismiss', {}), 404, 'M2M_NOT_FOUND');
  });

  test('creating and editing follow-ups never changes the automation settings', async () => {
    const world = await setupWorld();
    const configured = await patchSettings(world, { followUpMode: 'draft', followUpLevel: 'light', followUpInstructions: 'Be brief', quietHours: { start: '21:00', end: '08:00' } });
    assert.equal(configured.statusCode, 200);
    const before = await settingsOf(world);
    const created = await createFollowUp(world, { dueAt: new Date(clock.now().getTime() + DAY).toISOString(), messageDraft: 'Hola' });
    await app.api(world.key, 'PATCH', `/crm/follow-ups/${created.followUpId}`, { messageDraft: 'Hola otra vez', dueAt: null });
    await app.api(world.key, 'POST', `/crm/follow-ups/${created.followUpId}/dismiss`, {});
    const second = await createFollowUp(world);
    await app.api(world.key, 'POST', `/crm/follow-ups/${second.followUpId}/cancel`, {});
    assert.deepEqual(await settingsOf(world), before);

    const fresh = await setupWorld();
    const defaults = await settingsOf(fresh);
    const f = await createFollowUp(fresh);
    await app.api(fresh.key, 'PATCH', `/crm/follow-ups/${f.followUpId}`, { messageDraft: 'x' });
    assert.deepEqual(await settingsOf(fresh), defaults);
    assert.equal(defaults.followUpMode, 'off');
  });
});

describe('follow-up send', () => {
  test('202 with the sent follow-up and the queued reply; the message request is found by requestEventId', async () => {
    const world = await setupWorld();
    const created = await createFollowUp(world, { messageDraft: 'Hola Ana, ¿pudo ver la cotización?', reasonCode: 'quote_sent' });
    const response = await send(world, created.followUpId);
    assert.equal(response.statusCode, 202, response.body);
    const body = response.json() as SendBody;
    assert.deepEqual(sortedKeys(body), ['followUp', 'reply']);
    assert.deepEqual(sortedKeys(body.reply), ['conversationId', 'replyId', 'requestEventId', 'status']);
    assert.equal(body.reply.status, 'queued');
    assert.equal(body.reply.conversationId, world.conversationId);
    assert.equal(body.followUp.followUpId, created.followUpId);
    assert.equal(body.followUp.status, 'sent');
    assert.ok(isIso(body.followUp.sentAt));
    assert.equal(body.followUp.replyId, body.reply.replyId);
    assert.equal(body.followUp.messageDraft, 'Hola Ana, ¿pudo ver la cotización?');
    assert.deepEqual(await getFollowUp(world, created.followUpId), body.followUp);

    const status = await app.api(world.key, 'GET', `/message-requests/${body.reply.requestEventId}/status`);
    assert.equal(status.statusCode, 200, status.body);
    const record = status.json() as { requestEventId: string; status: string; conversationId: string; replyId: string; channel: string };
    assert.equal(record.requestEventId, body.reply.requestEventId);
    assert.equal(record.conversationId, world.conversationId);
    assert.equal(record.replyId, body.reply.replyId);
    assert.equal(record.channel, 'whatsapp');
    assert.ok(['queued', 'sent'].includes(record.status), record.status);
    const [request] = await db().query<{ text: string; recipient_phone: string }>('SELECT text, recipient_phone FROM message_requests WHERE id = $1', [body.reply.requestEventId]);
    assert.equal(request.text, 'Hola Ana, ¿pudo ver la cotización?');
    assert.match(request.recipient_phone, /^\+52/);
    // The sandbox provider accepts it: the request moves to sent through the pipeline.
    await eventually(async () => (await app.api(world.key, 'GET', `/message-requests/${body.reply.requestEventId}/status`)).json().status === 'sent', 10_000, 'sandbox send');

    // The opportunity records the follow-up: a new revision and an update event.
    const updates = (await events(world.tenantId, 'crm.opportunity.updated')).filter((e) => e.data.opportunityId === world.opportunityId);
    assert.equal(updates.length, 1);
    assert.equal(updates[0].data.revision, 2);
    assert.equal(updates[0].data.leadId, world.leadId);
  });

  test('without a draft a message is written for the guest; messageText overrides the draft', async () => {
    const world = await setupWorld();
    const plain = await createFollowUp(world, { reasonCode: 'no_reply' });
    const sent = await sendOk(world, plain.followUpId);
    assert.match(sent.followUp.messageDraft ?? '', /^Hi Ana,/);
    const [generated] = await db().query<{ text: string }>('SELECT text FROM message_requests WHERE id = $1', [sent.reply.requestEventId]);
    assert.equal(generated.text, sent.followUp.messageDraft);

    const drafted = await createFollowUp(world, { messageDraft: 'The draft' });
    const overridden = await sendOk(world, drafted.followUpId, { messageText: 'What I really want to say' });
    const [row] = await db().query<{ text: string }>('SELECT text FROM message_requests WHERE id = $1', [overridden.reply.requestEventId]);
    assert.equal(row.text, 'What I really want to say');
    assert.equal(overridden.followUp.messageDraft, 'What I really want to say', 'the follow-up keeps the text that was sent');

    const other = await createFollowUp(world);
    assert.deepEqual(paths(await send(world, other.followUpId, { messageText: '' })), ['body.messageText']);
    assert.deepEqual(paths(await send(world, other.followUpId, { text: 'x' })), ['body.text']);
    const noBody = await send(world, other.followUpId, undefined);
    assert.equal(noBody.statusCode, 202, `the body is optional: ${noBody.body}`);
  });

  test('a second send is 409 M2M_CONFLICT and creates nothing; edits and closes after a send are 409', async () => {
    const world = await setupWorld();
    const created = await createFollowUp(world, { messageDraft: 'Hola' });
    const first = await sendOk(world, created.followUpId);
    const before = await sends(world.tenantId);
    assert.deepEqual(before, { requests: 1, messages: 1 });
    for (const body of [{}, { messageText: 'Otra vez' }]) {
      const again = await send(world, created.followUpId, body);
      expectError(again, 409, 'M2M_CONFLICT');
    }
    expectError(await app.api(world.key, 'PATCH', `/crm/follow-ups/${created.followUpId}`, { messageDraft: 'x' }), 409, 'M2M_CONFLICT');
    expectError(await app.api(world.key, 'POST', `/crm/follow-ups/${created.followUpId}/dismiss`, {}), 409, 'M2M_CONFLICT');
    expectError(await app.api(world.key, 'POST', `/crm/follow-ups/${created.followUpId}/cancel`, {}), 409, 'M2M_CONFLICT');
    assert.deepEqual(await sends(world.tenantId), before);
    assert.deepEqual(await getFollowUp(world, created.followUpId), first.followUp);
    assert.equal((await listOk(world)).followUps.length, 1, 'no new follow-up is created to retry');
  });

  test('five concurrent sends: exactly one 202, four 409, one message request', async () => {
    const world = await setupWorld();
    for (let round = 0; round < 3; round++) {
      const created = await createFollowUp(world, { messageDraft: `Round ${round}` });
      const responses = await Promise.all(Array.from({ length: 5 }, (_, i) => send(world, created.followUpId, i % 2 ? { messageText: `Try ${i}` } : {})));
      const statuses = responses.map((r) => r.statusCode).sort();
      assert.deepEqual(statuses, [202, 409, 409, 409, 409], responses.map((r) => r.body).join('\n'));
      for (const r of responses.filter((x) => x.statusCode === 409)) assert.equal(r.json().error.code, 'M2M_CONFLICT');
      const accepted = responses.find((r) => r.statusCode === 202)!.json() as SendBody;
      assert.equal(await count('SELECT count(*)::int AS n FROM message_requests WHERE tenant_id = $1 AND reply_id = $2', [world.tenantId, accepted.reply.replyId]), 1);
      assert.deepEqual(await sends(world.tenantId), { requests: round + 1, messages: round + 1 });
      assert.equal((await getFollowUp(world, created.followUpId)).status, 'sent');
    }
  });

  test('Idempotency-Key: a retry replays the 202 without a second message; another body with the key is 409', async () => {
    const world = await setupWorld();
    const created = await createFollowUp(world, { messageDraft: 'Hola' });
    const key = randomUUID();
    const first = await send(world, created.followUpId, {}, { 'idempotency-key': key });
    assert.equal(first.statusCode, 202, first.body);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    const retry = await send(world, created.followUpId, {}, { 'idempotency-key': key });
    assert.equal(retry.statusCode, 202, retry.body);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.deepEqual(retry.json(), first.json(), 'the replay is the first response');
    assert.deepEqual(await sends(world.tenantId), { requests: 1, messages: 1 });

    expectError(await send(world, created.followUpId, { messageText: 'Otro texto' }, { 'idempotency-key': key }), 409, 'M2M_IDEMPOTENCY_CONFLICT');
    expectError(await send(world, created.followUpId, {}, { 'idempotency-key': randomUUID() }), 409, 'M2M_CONFLICT');
    assert.deepEqual(await sends(world.tenantId), { requests: 1, messages: 1 });

    // The key is scoped to the follow-up: the same key on another follow-up is a different request.
    const otherFollowUp = await createFollowUp(world);
    expectError(await send(world, otherFollowUp.followUpId, {}, { 'idempotency-key': key }), 409, 'M2M_IDEMPOTENCY_CONFLICT');
    // An error is not stored: a refused send leaves the key free for a corrected request.
    await app.api(world.key, 'POST', `/crm/follow-ups/${otherFollowUp.followUpId}/dismiss`, {});
    const fresh = randomUUID();
    expectError(await send(world, otherFollowUp.followUpId, {}, { 'idempotency-key': fresh }), 409, 'M2M_CONFLICT');
    assert.equal((await count('SELECT count(*)::int AS n FROM idempotency_keys WHERE tenant_id = $1 AND key = $2', [world.tenantId, fresh])), 0);
    assert.deepEqual(paths(await send(world, otherFollowUp.followUpId, {}, { 'idempotency-key': 'k'.repeat(256) })), ['headers.idempotency-key']);
  });

  test('dismissed, canceled, expired and opted-out follow-ups are 409 and send nothing', async () => {
    const world = await setupWorld();
    const dismissed = await createFollowUp(world);
    await app.api(world.key, 'POST', `/crm/follow-ups/${dismissed.followUpId}/dismiss`, {});
    const canceled = await createFollowUp(world);
    await app.api(world.key, 'POST', `/crm/follow-ups/${canceled.followUpId}/cancel`, {});
    expectError(await send(world, dismissed.followUpId), 409, 'M2M_CONFLICT');
    expectError(await send(world, canceled.followUpId), 409, 'M2M_CONFLICT');
    expectError(await send(world, 'fu_missing'), 404, 'M2M_NOT_FOUND');
    const other = await setupWorld();
    expectError(await send(other, dismissed.followUpId), 404, 'M2M_NOT_FOUND');

    const optedOut = await addGuest(world.tenantId, world.channelId, { name: 'Pedro' });
    const toOptedOut = await createFollowUp({ ...world, ...optedOut }, { messageDraft: 'Hola Pedro' });
    await app.admin('PATCH', `/tenants/${world.tenantId}/contacts/${optedOut.contactId}`, { optedOut: true });
    const refused = expectError(await send(world, toOptedOut.followUpId), 409, 'M2M_CONFLICT');
    assert.equal(refused.details.reason, 'recipient_opted_out');
    assert.equal((await getFollowUp(world, toOptedOut.followUpId)).status, 'pending', 'a refused send does not claim');
    assert.deepEqual(await sends(world.tenantId), { requests: 0, messages: 0 });

    const expiring = await createFollowUp(world, { messageDraft: 'Hola' });
    clock.advance(Date.parse(expiring.expiresAt) - clock.now().getTime() + 1000);
    // Past expiresAt the send is refused at once, whether or not the sweep has marked it expired yet.
    expectError(await send(world, expiring.followUpId), 409, 'M2M_CONFLICT');
    assert.deepEqual(await sends(world.tenantId), { requests: 0, messages: 0 });
    // The automation sweep marks it expired (every tenant, whatever its mode).
    app.runtime.runner.wake();
    await eventually(async () => (await getFollowUp(world, expiring.followUpId)).status === 'expired', 10_000, 'expired status');
    expectError(await send(world, expiring.followUpId), 409, 'M2M_CONFLICT');
    expectError(await app.api(world.key, 'PATCH', `/crm/follow-ups/${expiring.followUpId}`, { messageDraft: 'x' }), 409, 'M2M_CONFLICT');
    expectError(await app.api(world.key, 'POST', `/crm/follow-ups/${expiring.followUpId}/dismiss`, {}), 409, 'M2M_CONFLICT');
    const expired = (await listOk(world, 'status=expired')).followUps.map((f) => f.followUpId);
    assert.ok(expired.includes(expiring.followUpId) && expired.includes(toOptedOut.followUpId), 'every open follow-up past expiresAt is expired');
    assert.ok(!expired.includes(dismissed.followUpId), 'closed follow-ups keep their status');
    assert.deepEqual(await sends(world.tenantId), { requests: 0, messages: 0 });
  });

  test('CRM completion failure: 202 with crmStatusUpdateFailed, never sent twice, reconciled by automation', async () => {
    const world = await setupWorld();
    const created = await createFollowUp(world, { messageDraft: 'Hola Ana' });
    const q = (sql: string) => db().query(sql);
    await q(`CREATE FUNCTION crm_test_fail_completion() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF NEW.status = 'sent' THEN RAISE EXCEPTION 'simulated CRM completion failure'; END IF;
               RETURN NEW;
             END $$`);
    await q('CREATE TRIGGER crm_test_fail_completion BEFORE UPDATE ON follow_ups FOR EACH ROW EXECUTE FUNCTION crm_test_fail_completion()');
    let triggerInstalled = true;
    try {
      const idempotencyKey = randomUUID();
      const response = await send(world, created.followUpId, {}, { 'idempotency-key': idempotencyKey });
      assert.equal(response.statusCode, 202, response.body);
      const body = response.json() as SendBody;
      assert.equal(body.crmStatusUpdateFailed, true);
      const replay = await send(world, created.followUpId, {}, { 'idempotency-key': idempotencyKey });
      assert.equal(replay.statusCode, 202, replay.body);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.deepEqual(replay.json(), body, 'the replay still reports the failed completion');
      assert.equal(body.reply.status, 'queued');
      assert.notEqual(body.followUp.status, 'sent');
      assert.equal(body.followUp.replyId, body.reply.replyId);
      const status = await app.api(world.key, 'GET', `/message-requests/${body.reply.requestEventId}/status`);
      assert.equal(status.statusCode, 200, 'the send was accepted');
      assert.deepEqual(await sends(world.tenantId), { requests: 1, messages: 1 });

      expectError(await send(world, created.followUpId), 409, 'M2M_CONFLICT');
      expectError(await send(world, created.followUpId, {}, { 'idempotency-key': randomUUID() }), 409, 'M2M_CONFLICT');
      assert.deepEqual(await sends(world.tenantId), { requests: 1, messages: 1 }, 'not sent again');
      assert.notEqual((await getFollowUp(world, created.followUpId)).status, 'sent');

      await q('DROP TRIGGER crm_test_fail_completion ON follow_ups');
      await q('DROP FUNCTION crm_test_fail_completion()');
      triggerInstalled = false;

      // Automation (on for this tenant) finishes the record on its next run.
      assert.equal((await patchSettings(world, { followUpMode: 'draft' })).statusCode, 200);
      clock.advance(61_000);
      app.runtime.runner.wake();
      const reconciled = await eventually(async () => {
        const current = await getFollowUp(world, created.followUpId);
        return current.status === 'sent' ? current : undefined;
      }, 15_000, 'reconciled follow-up');
      assert.equal(reconciled.replyId, body.reply.replyId);
      assert.ok(isIso(reconciled.sentAt));
      assert.deepEqual(await sends(world.tenantId), { requests: 1, messages: 1 });
      expectError(await send(world, created.followUpId), 409, 'M2M_CONFLICT');
      const lateReplay = await send(world, created.followUpId, {}, { 'idempotency-key': idempotencyKey });
      assert.equal(lateReplay.statusCode, 202);
      assert.deepEqual(lateReplay.json(), { followUp: reconciled, reply: body.reply }, 'a replay after reconciliation shows the completed record');
      assert.deepEqual(await sends(world.tenantId), { requests: 1, messages: 1 });
    } finally {
      if (triggerInstalled) {
        await q('DROP TRIGGER IF EXISTS crm_test_fail_completion ON follow_ups');
        await q('DROP FUNCTION IF EXISTS crm_test_fail_completion()');
      }
    }
  });
});

describe('follow-up settings', () => {
  test('defaults; timezone and sales flags come from the tenant', async () => {
    const world = await setupWorld({ timezone: 'Europe/Madrid' });
    assert.deepEqual(await settingsOf(world), { followUpMode: 'off', followUpLevel: 'balanced', timezone: 'Europe/Madrid', salesAvailable: false, salesPublished: false });
    await app.admin('PATCH', `/tenants/${world.tenantId}/settings`, { timezone: 'America/New_York', salesAvailable: true });
    assert.deepEqual(await settingsOf(world), { followUpMode: 'off', followUpLevel: 'balanced', timezone: 'America/New_York', salesAvailable: true, salesPublished: false });
    await app.admin('PATCH', `/tenants/${world.tenantId}/settings`, { salesPublished: true });
    const settings = await settingsOf(world);
    assert.equal(settings.salesPublished, true);
    assert.equal(settings.timezone, 'America/New_York');
    const utc = await setupWorld();
    assert.equal((await settingsOf(utc)).timezone, 'UTC');
  });

  test('PATCH changes only the supplied fields and returns the settings', async () => {
    const world = await setupWorld({ timezone: 'America/Mexico_City' });
    const mode = await patchSettings(world, { followUpMode: 'draft' });
    assert.equal(mode.statusCode, 200, mode.body);
    assert.deepEqual(mode.json(), { followUpMode: 'draft', followUpLevel: 'balanced', timezone: 'America/Mexico_City', salesAvailable: false, salesPublished: false });

    const quiet = await patchSettings(world, { quietHours: { start: '22:00', end: '07:00' } });
    assert.deepEqual(quiet.json(), { followUpMode: 'draft', followUpLevel: 'balanced', quietHours: { start: '22:00', end: '07:00' }, timezone: 'America/Mexico_City', salesAvailable: false, salesPublished: false });

    const more = await patchSettings(world, { followUpLevel: 'proactive', followUpInstructions: 'Usa un tono cálido.' });
    const expected = {
      followUpMode: 'draft',
      followUpLevel: 'proactive',
      followUpInstructions: 'Usa un tono cálido.',
      quietHours: { start: '22:00', end: '07:00' },
      timezone: 'America/Mexico_City',
      salesAvailable: false,
      salesPublished: false,
    };
    assert.deepEqual(more.json(), expected);
    assert.deepEqual(await settingsOf(world), expected);

    const auto = await patchSettings(world, { followUpMode: 'auto' });
    assert.deepEqual(auto.json(), { ...expected, followUpMode: 'auto' });
    const noQuiet = await patchSettings(world, { quietHours: null, followUpMode: 'off' });
    const { quietHours: _dropped, ...rest } = expected;
    assert.deepEqual(noQuiet.json(), { ...rest, followUpMode: 'off' });
    assert.deepEqual(await settingsOf(world), { ...rest, followUpMode: 'off' });
    const maxInstructions = await patchSettings(world, { followUpInstructions: 'x'.repeat(2000) });
    assert.equal(maxInstructions.statusCode, 200);

    const other = await setupWorld();
    assert.equal((await settingsOf(other)).followUpMode, 'off', "another tenant's settings are untouched");
  });

  test('invalid settings are 400 and change nothing', async () => {
    const world = await setupWorld();
    const before = await settingsOf(world);
    const cases: Array<[unknown, string]> = [
      [{}, 'body'],
      [{ quietHours: { start: '22:00', end: '22:00' } }, 'body.quietHours'],
      [{ quietHours: { start: '25:00', end: '07:00' } }, 'body.quietHours.start'],
      [{ quietHours: { start: '22:00', end: '7:00' } }, 'body.quietHours.end'],
      [{ quietHours: { start: '22:00', end: '07:60' } }, 'body.quietHours.end'],
      [{ quietHours: { start: '22:00' } }, 'body.quietHours.end'],
      [{ followUpInstructions: 'x'.repeat(2001) }, 'body.followUpInstructions'],
      [{ followUpMode: 'always' }, 'body.followUpMode'],
      [{ followUpLevel: 'aggressive' }, 'body.followUpLevel'],
      [{ timezone: 'Europe/Madrid' }, 'body.timezone'],
      [{ followUpMode: 'auto', salesAvailable: true }, 'body.salesAvailable'],
    ];
    for (const [body, path] of cases) {
      const response = await patchSettings(world, body);
      const issues = issuesOf(response);
      assert.ok(issues.some((i) => i.path === path || i.path.startsWith(`${path}.`) || (path === 'body' && i.path.startsWith('body'))), `${JSON.stringify(body)} → ${JSON.stringify(issues)}`);
    }
    assert.deepEqual(await settingsOf(world), before);
  });

  test('scopes: GET needs crm:automation:read (write implies it); PATCH needs crm:automation:write', async () => {
    const world = await setupWorld();
    const reader = await addKey(app, world.tenantId, ['crm:automation:read']);
    const writer = await addKey(app, world.tenantId, ['crm:automation:write']);
    const followUps = await addKey(app, world.tenantId, ['crm:followups:write']);
    assert.equal((await app.api(reader.key, 'GET', '/crm/follow-up-settings')).statusCode, 200);
    assert.equal((await app.api(writer.key, 'GET', '/crm/follow-up-settings')).statusCode, 200);
    const noRead = expectError(await app.api(followUps.key, 'GET', '/crm/follow-up-settings'), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.deepEqual(noRead.details, { requiredScopes: ['crm:automation:read'], missingScopes: ['crm:automation:read'] });
    for (const key of [reader.key, followUps.key]) {
      const refused = expectError(await patchSettings({ key }, { followUpMode: 'auto' }), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(refused.details, { requiredScopes: ['crm:automation:write'], missingScopes: ['crm:automation:write'] });
    }
    // Scope is checked before validation: a refused caller learns nothing about the body rules.
    expectError(await patchSettings(reader, { followUpMode: 'bogus' }), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.equal((await settingsOf(world)).followUpMode, 'off');
    const ok = await patchSettings(writer, { followUpMode: 'draft' });
    assert.equal(ok.statusCode, 200);
    assert.equal((await settingsOf(reader)).followUpMode, 'draft');
  });
});
