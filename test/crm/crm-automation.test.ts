import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { ManualClock } from '../../src/clock.js';
import { AUTOMATION_TASK } from '../../src/crm/automation.js';
import { inQuietHours, localMinutes } from '../../src/crm/quiet-hours.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { addKey } from '../fixtures/webhooks.js';

// Follow-up automation (the self-rescheduling `crm.automation` job) driven by a manual clock: each run
// happens at an instant the test chooses, and the test waits for that run to finish (the job it
// schedules for instant + interval appears) before looking at the effects.

const INTERVAL_MS = 60_000;
const MINUTE = 60_000;
const SCOPES = ['crm:followups:write', 'crm:automation:write', 'messages:read'];

interface FollowUp {
  followUpId: string;
  status: string;
  mode: string;
  messageDraft?: string;
  draftStatus: string;
  dueAt?: string;
  expiresAt: string;
  sentAt?: string;
  replyId?: string;
}

interface Guest {
  contactId: string;
  conversationId: string;
  leadId: string;
}

interface Tenant {
  tenantId: string;
  key: string;
  channelId: string;
}

describe('inQuietHours', () => {
  const at = (iso: string) => new Date(iso);

  test('a window across midnight in the business time zone (America/New_York, winter)', () => {
    const quiet = { start: '22:00', end: '07:00' };
    const cases: Array<[string, boolean, string]> = [
      ['2026-01-16T02:59:00Z', false, '21:59 EST'],
      ['2026-01-16T03:00:00Z', true, '22:00 EST: start is inside'],
      ['2026-01-16T04:30:00Z', true, '23:30 EST'],
      ['2026-01-16T05:00:00Z', true, '00:00 EST'],
      ['2026-01-16T11:55:00Z', true, '06:55 EST'],
      ['2026-01-16T11:59:59Z', true, '06:59:59 EST'],
      ['2026-01-16T12:00:00Z', false, '07:00 EST: end is outside'],
      ['2026-01-16T12:05:00Z', false, '07:05 EST'],
      ['2026-01-16T17:00:00Z', false, '12:00 EST'],
    ];
    for (const [instant, expected, label] of cases) assert.equal(inQuietHours(at(instant), 'America/New_York', quiet), expected, label);
    // The same instants read in UTC give other answers: the time zone is what decides.
    assert.equal(inQuietHours(at('2026-01-16T02:30:00Z'), 'UTC', quiet), true);
    assert.equal(inQuietHours(at('2026-01-16T02:30:00Z'), 'America/New_York', quiet), false);
    assert.equal(inQuietHours(at('2026-01-16T12:05:00Z'), 'Asia/Tokyo', quiet), false, '21:05 JST');
    assert.equal(inQuietHours(at('2026-01-16T13:05:00Z'), 'Asia/Tokyo', quiet), true, '22:05 JST');
  });

  test('US spring forward (2026-03-08, 02:00 EST → 03:00 EDT) with quiet hours 01:00–03:30', () => {
    const quiet = { start: '01:00', end: '03:30' };
    const zone = 'America/New_York';
    const cases: Array<[string, boolean, string]> = [
      ['2026-03-08T05:59:00Z', false, '00:59 EST'],
      ['2026-03-08T06:00:00Z', true, '01:00 EST'],
      ['2026-03-08T06:30:00Z', true, '01:30 EST'],
      ['2026-03-08T06:59:00Z', true, '01:59 EST'],
      ['2026-03-08T07:00:00Z', true, '03:00 EDT (02:00 never happens)'],
      ['2026-03-08T07:15:00Z', true, '03:15 EDT'],
      ['2026-03-08T07:29:00Z', true, '03:29 EDT'],
      ['2026-03-08T07:30:00Z', false, '03:30 EDT'],
      ['2026-03-08T07:40:00Z', false, '03:40 EDT'],
      ['2026-03-08T08:15:00Z', false, '04:15 EDT'],
    ];
    for (const [instant, expected, label] of cases) assert.equal(inQuietHours(at(instant), zone, quiet), expected, label);
    assert.equal(localMinutes(at('2026-03-08T06:59:00Z'), zone), 1 * 60 + 59);
    assert.equal(localMinutes(at('2026-03-08T07:00:00Z'), zone), 3 * 60, 'one minute later the wall clock reads 03:00');
    // A fixed EST offset would put 07:40Z at 02:40, inside the window; the real wall clock says 03:40.
    assert.equal(localMinutes(at('2026-03-08T07:40:00Z'), zone), 3 * 60 + 40);
  });

  test('Europe/Madrid autumn change (2026-10-25, 03:00 CEST → 02:00 CET): the repeated hour is quiet twice', () => {
    const zone = 'Europe/Madrid';
    const night = { start: '02:00', end: '02:30' };
    const cases: Array<[string, boolean, string]> = [
      ['2026-10-24T23:59:00Z', false, '01:59 CEST'],
      ['2026-10-25T00:15:00Z', true, '02:15 CEST (first time)'],
      ['2026-10-25T00:45:00Z', false, '02:45 CEST'],
      ['2026-10-25T01:15:00Z', true, '02:15 CET (second time)'],
      ['2026-10-25T01:45:00Z', false, '02:45 CET'],
      ['2026-10-25T02:15:00Z', false, '03:15 CET'],
    ];
    for (const [instant, expected, label] of cases) assert.equal(inQuietHours(at(instant), zone, night), expected, label);

    const overnight = { start: '22:00', end: '07:00' };
    assert.equal(inQuietHours(at('2026-10-24T05:30:00Z'), zone, overnight), false, '07:30 CEST the day before');
    assert.equal(inQuietHours(at('2026-10-25T05:30:00Z'), zone, overnight), true, '06:30 CET: the same UTC time is now inside');
    assert.equal(inQuietHours(at('2026-10-25T06:00:00Z'), zone, overnight), false, '07:00 CET');
    assert.equal(inQuietHours(at('2026-10-24T20:00:00Z'), zone, overnight), true, '22:00 CEST');
    assert.equal(inQuietHours(at('2026-10-24T19:59:00Z'), zone, overnight), false, '21:59 CEST');
  });

  test('no quiet hours: never quiet', () => {
    assert.equal(inQuietHours(new Date('2026-01-16T04:30:00Z'), 'America/New_York', null), false);
  });
});

describe('follow-up automation', () => {
  let app: TestApp;
  const clock = new ManualClock('2026-01-15T17:00:00.000Z');
  let phoneSeq = 0;

  const db = () => app.runtime.services.db;

  async function queuedRun(): Promise<{ id: number; run_at: Date } | undefined> {
    const rows = await db().query<{ id: number; run_at: Date }>(`SELECT id, run_at FROM jobs WHERE task = $1 AND state = 'queued'`, [AUTOMATION_TASK]);
    return rows[0];
  }

  /** Waits for the run at `instant` to finish: it schedules the next one for instant + interval. */
  async function awaitRunAt(instant: Date): Promise<void> {
    const next = instant.getTime() + INTERVAL_MS;
    await eventually(async () => {
      const failing = await db().query<{ last_error: string }>(`SELECT last_error FROM jobs WHERE task = $1 AND last_error IS NOT NULL`, [AUTOMATION_TASK]);
      if (failing.length > 0) throw new Error(`automation run failed: ${failing[0].last_error}`);
      const queued = await queuedRun();
      return queued?.run_at.getTime() === next;
    }, 15_000, `the automation run at ${instant.toISOString()}`);
  }

  /** Moves the clock to `at` (at least one interval after the previous run), wakes the runner, waits for the run. */
  async function runAutomationAt(at: string | Date): Promise<Date> {
    const instant = new Date(at);
    const queued = await queuedRun();
    assert.ok(queued, 'an automation run is queued');
    assert.ok(instant.getTime() >= queued.run_at.getTime(), `run at ${instant.toISOString()} is before the queued run ${queued.run_at.toISOString()}`);
    assert.equal(await runsSince(queued.run_at), 0);
    clock.set(instant);
    app.runtime.runner.wake();
    await awaitRunAt(instant);
    assert.equal(await runsSince(queued.run_at), 1, 'exactly one run');
    return instant;
  }

  async function runAutomationIn(ms: number): Promise<Date> {
    return runAutomationAt(new Date(clock.now().getTime() + ms));
  }

  /** Finished automation runs since `since` (inclusive). Old finished jobs are purged by maintenance, so never count all. */
  async function runsSince(since: Date): Promise<number> {
    const [row] = await db().query<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE task = $1 AND state = 'succeeded' AND finished_at >= $2`, [AUTOMATION_TASK, since]);
    return row.n;
  }

  async function messageRequests(tenantId: string): Promise<Array<{ id: string; reply_id: string; conversation_id: string; text: string }>> {
    return db().query('SELECT id, reply_id, conversation_id, text FROM message_requests WHERE tenant_id = $1 ORDER BY created_at, id', [tenantId]);
  }

  async function newTenant(options: { timezone?: string; settings?: Record<string, unknown> } = {}): Promise<Tenant> {
    const tenant = await app.admin<{ tenantId: string }>('POST', '/tenants', { name: 'Hotel Luna', ...(options.timezone ? { timezone: options.timezone } : {}) });
    const { key } = await addKey(app, tenant.tenantId, SCOPES);
    const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp line' });
    const created = { tenantId: tenant.tenantId, key, channelId };
    if (options.settings) await setSettings(created, options.settings);
    return created;
  }

  async function setSettings(tenant: Tenant, body: Record<string, unknown>): Promise<void> {
    const response = await app.api(tenant.key, 'PATCH', '/crm/follow-up-settings', body);
    assert.equal(response.statusCode, 200, response.body);
  }

  /** A guest writes in and becomes a lead; consent and opt-out as given. */
  async function addGuest(tenant: Tenant, options: { consent?: boolean; optedOut?: boolean; name?: string } = {}): Promise<Guest> {
    const name = options.name ?? 'Ana López';
    const inbound = await app.admin<{ conversationId: string; contactId: string }>('POST', `/tenants/${tenant.tenantId}/inbound-messages`, {
      channelId: tenant.channelId,
      contact: { name, phone: `+5255${40_000_000 + ++phoneSeq}` },
      text: 'Hola',
    });
    const consent = options.consent ?? true;
    if (consent || options.optedOut) {
      await app.admin('PATCH', `/tenants/${tenant.tenantId}/contacts/${inbound.contactId}`, { consent, ...(options.optedOut ? { optedOut: true } : {}) });
    }
    const lead = await app.admin<{ leadId: string }>('POST', `/tenants/${tenant.tenantId}/leads`, { name, conversationId: inbound.conversationId });
    return { contactId: inbound.contactId, conversationId: inbound.conversationId, leadId: lead.leadId };
  }

  async function createFollowUp(tenant: Tenant, guest: Guest, body: Record<string, unknown> = {}): Promise<FollowUp> {
    const response = await app.api(tenant.key, 'POST', '/crm/follow-ups', { leadId: guest.leadId, conversationId: guest.conversationId, ...body });
    assert.equal(response.statusCode, 201, response.body);
    return (response.json() as { followUp: FollowUp }).followUp;
  }

  /** A follow-up that became due `agoMs` before the current clock. */
  function dueAgo(agoMs = MINUTE): { dueAt: string } {
    return { dueAt: new Date(clock.now().getTime() - agoMs).toISOString() };
  }

  async function read(tenant: Tenant, followUpId: string): Promise<FollowUp> {
    const response = await app.api(tenant.key, 'GET', `/crm/follow-ups/${followUpId}`);
    assert.equal(response.statusCode, 200, response.body);
    return (response.json() as { followUp: FollowUp }).followUp;
  }

  before(async () => {
    app = await startTestApp({ clock, startWorkers: true, env: { CRM_AUTOMATION_INTERVAL_MS: String(INTERVAL_MS) } });
    // Starting the workers runs automation once at once; the next run waits for the clock.
    await awaitRunAt(clock.now());
  });
  after(() => app.close());

  test('the job reschedules itself one interval after each run and does not run before that', async () => {
    const queued = await queuedRun();
    assert.ok(queued);
    assert.equal(queued.run_at.getTime(), clock.now().getTime() + INTERVAL_MS);
    const lastRun = clock.now();
    clock.advance(INTERVAL_MS - 1000);
    app.runtime.runner.wake();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(await runsSince(new Date(lastRun.getTime() + 1)), 0, 'not due yet');
    await runAutomationAt(queued.run_at);
    const [{ n }] = await db().query<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE task = $1 AND state IN ('queued', 'running')`, [AUTOMATION_TASK]);
    assert.equal(n, 1, 'one pending run at a time');
  });

  test('off: due follow-ups are neither drafted nor sent', async () => {
    const tenant = await newTenant();
    const guest = await addGuest(tenant);
    const followUp = await createFollowUp(tenant, guest, dueAgo());
    await runAutomationIn(2 * MINUTE);
    const after = await read(tenant, followUp.followUpId);
    assert.equal(after.status, 'scheduled');
    assert.equal(after.draftStatus, 'empty');
    assert.equal(after.messageDraft, undefined);
    assert.deepEqual(await messageRequests(tenant.tenantId), []);
  });

  test('draft: empty drafts of due follow-ups are generated; nothing is sent; written drafts and later follow-ups are left alone', async () => {
    const tenant = await newTenant({ settings: { followUpMode: 'draft' } });
    const guest = await addGuest(tenant);
    const due = await createFollowUp(tenant, guest, { ...dueAgo(), reasonCode: 'quote_sent' });
    const written = await createFollowUp(tenant, guest, { ...dueAgo(), messageDraft: 'Mi propio texto' });
    const later = await createFollowUp(tenant, guest, { dueAt: new Date(clock.now().getTime() + 3 * 60 * MINUTE).toISOString() });
    const undated = await createFollowUp(tenant, guest);

    await runAutomationIn(2 * MINUTE);
    const drafted = await read(tenant, due.followUpId);
    assert.equal(drafted.draftStatus, 'generated');
    assert.match(drafted.messageDraft ?? '', /^Hi Ana, .*quote/);
    assert.equal(drafted.status, 'scheduled', 'drafted, not sent');
    assert.deepEqual(await read(tenant, written.followUpId), written, 'a written draft is not touched');
    assert.equal((await read(tenant, later.followUpId)).draftStatus, 'empty');
    assert.equal((await read(tenant, undated.followUpId)).draftStatus, 'empty');
    assert.deepEqual(await messageRequests(tenant.tenantId), []);

    // A later run does not write over the generated draft, nor over one the user edited meanwhile.
    const edited = await app.api(tenant.key, 'PATCH', `/crm/follow-ups/${due.followUpId}`, { messageDraft: 'Corregido' });
    assert.equal(edited.statusCode, 200);
    await runAutomationAt(new Date(Date.parse(later.dueAt!) + MINUTE));
    assert.equal((await read(tenant, due.followUpId)).messageDraft, 'Corregido');
    assert.equal((await read(tenant, due.followUpId)).draftStatus, 'edited');
    assert.equal((await read(tenant, later.followUpId)).draftStatus, 'generated', 'drafted once it became due');
    assert.deepEqual(await messageRequests(tenant.tenantId), []);
  });

  test('draft: a draft the user writes while a run is drafting is not overwritten', { skip: !process.env.DATABASE_URL && 'needs a second PostgreSQL connection to hold a row lock' }, async () => {
    const tenant = await newTenant({ settings: { followUpMode: 'draft' } });
    const guest = await addGuest(tenant);
    const followUp = await createFollowUp(tenant, guest, dueAgo());
    const queued = await queuedRun();
    assert.ok(queued);
    const instant = new Date(Math.max(queued.run_at.getTime(), clock.now().getTime() + 2 * MINUTE));
    // The user's edit: a transaction on another connection that holds the row while the run reaches it.
    const user = new pg.Client({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${db().schema},public` });
    await user.connect();
    try {
      await user.query('BEGIN');
      await user.query('SELECT id FROM follow_ups WHERE id = $1 FOR UPDATE', [followUp.followUpId]);
      clock.set(instant);
      app.runtime.runner.wake();
      await eventually(async () => {
        const { rows } = await user.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))');
        return rows[0].n > 0;
      }, 10_000, 'the run to wait for the row');
      await user.query(`UPDATE follow_ups SET message_draft = 'Written by hand', draft_status = 'edited' WHERE id = $1`, [followUp.followUpId]);
      await user.query('COMMIT');
    } finally {
      await user.end();
    }
    await awaitRunAt(instant);
    const after = await read(tenant, followUp.followUpId);
    assert.equal(after.messageDraft, 'Written by hand');
    assert.equal(after.draftStatus, 'edited');
  });

  test('auto: sends due follow-ups to consenting contacts only, including follow-ups that existed before auto was turned on', async () => {
    const tenant = await newTenant();
    const consenting = await addGuest(tenant);
    const existing = await createFollowUp(tenant, consenting, dueAgo());
    assert.equal(existing.mode, 'draft');
    await setSettings(tenant, { followUpMode: 'auto' });
    const noConsent = await addGuest(tenant, { consent: false, name: 'Bruno' });
    const optedOut = await addGuest(tenant, { optedOut: true, name: 'Carla' });
    const laterGuest = await addGuest(tenant, { name: 'Diego' });
    const toNoConsent = await createFollowUp(tenant, noConsent, dueAgo());
    const toOptedOut = await createFollowUp(tenant, optedOut, dueAgo());
    const notDue = await createFollowUp(tenant, laterGuest, { dueAt: new Date(clock.now().getTime() + 30 * MINUTE).toISOString(), messageDraft: 'Hola Diego' });
    const undated = await createFollowUp(tenant, laterGuest);
    assert.equal(notDue.mode, 'auto');

    const first = await runAutomationIn(2 * MINUTE);
    const sent = await read(tenant, existing.followUpId);
    assert.equal(sent.status, 'sent');
    assert.equal(sent.sentAt, first.toISOString());
    assert.ok(sent.replyId);
    const requests = await messageRequests(tenant.tenantId);
    assert.equal(requests.length, 1);
    assert.equal(requests[0].reply_id, sent.replyId);
    assert.equal(requests[0].conversation_id, consenting.conversationId);
    assert.match(requests[0].text, /^Hi Ana,/);
    const status = await app.api(tenant.key, 'GET', `/message-requests/${requests[0].id}/status`);
    assert.equal(status.statusCode, 200, status.body);
    assert.equal(status.json().replyId, sent.replyId);
    for (const id of [toNoConsent.followUpId, toOptedOut.followUpId, notDue.followUpId]) assert.equal((await read(tenant, id)).status, 'scheduled');
    assert.equal((await read(tenant, undated.followUpId)).status, 'pending');

    // Once due, the later one goes; consent given later counts at the next run; opt-out never does.
    await app.admin('PATCH', `/tenants/${tenant.tenantId}/contacts/${noConsent.contactId}`, { consent: true });
    await runAutomationAt(new Date(Date.parse(notDue.dueAt!) + MINUTE));
    assert.equal((await read(tenant, notDue.followUpId)).status, 'sent');
    assert.equal((await read(tenant, toNoConsent.followUpId)).status, 'sent');
    assert.equal((await read(tenant, toOptedOut.followUpId)).status, 'scheduled');
    assert.equal((await read(tenant, undated.followUpId)).status, 'pending', 'a follow-up without dueAt is never due');
    const texts = (await messageRequests(tenant.tenantId)).map((r) => r.text);
    assert.equal(texts.length, 3);
    assert.ok(texts.includes('Hola Diego'), 'a written draft is what gets sent');

    // Nothing is sent twice on later runs.
    await runAutomationIn(2 * MINUTE);
    assert.equal((await messageRequests(tenant.tenantId)).length, 3);
  });

  test('quiet hours 22:00–07:00 across midnight, in the business time zone', async () => {
    // 2026-01-16 02:30Z is 21:30 in New York (outside) and 03:30 in Madrid (inside).
    assert.ok(clock.now().getTime() < Date.parse('2026-01-16T02:00:00Z'), `clock ${clock.now().toISOString()} is early enough`);
    const quiet = { followUpMode: 'auto', quietHours: { start: '22:00', end: '07:00' } };
    const newYork = await newTenant({ timezone: 'America/New_York', settings: quiet });
    const madrid = await newTenant({ timezone: 'Europe/Madrid', settings: quiet });
    const nyGuest = await addGuest(newYork);
    const madridGuest = await addGuest(madrid);
    const nyEvening = await createFollowUp(newYork, nyGuest, dueAgo());
    const madridNight = await createFollowUp(madrid, madridGuest, dueAgo());

    await runAutomationAt('2026-01-16T02:30:00Z');
    assert.equal((await read(newYork, nyEvening.followUpId)).status, 'sent', '21:30 in New York');
    assert.equal((await read(madrid, madridNight.followUpId)).status, 'scheduled', '03:30 in Madrid');

    const nyNight = await createFollowUp(newYork, nyGuest, { dueAt: '2026-01-16T03:30:00Z' });
    await runAutomationAt('2026-01-16T04:30:00Z');
    assert.equal((await read(newYork, nyNight.followUpId)).status, 'scheduled', '23:30 in New York');
    assert.equal((await read(madrid, madridNight.followUpId)).status, 'scheduled', '05:30 in Madrid');

    await runAutomationAt('2026-01-16T06:30:00Z');
    assert.equal((await read(madrid, madridNight.followUpId)).status, 'sent', '07:30 in Madrid');
    assert.equal((await read(newYork, nyNight.followUpId)).status, 'scheduled', '01:30 in New York');

    await runAutomationAt('2026-01-16T11:55:00Z');
    assert.equal((await read(newYork, nyNight.followUpId)).status, 'scheduled', '06:55 in New York');

    const morning = await runAutomationAt('2026-01-16T12:05:00Z');
    const sent = await read(newYork, nyNight.followUpId);
    assert.equal(sent.status, 'sent', '07:05 in New York');
    assert.equal(sent.sentAt, morning.toISOString());
    assert.equal((await messageRequests(newYork.tenantId)).length, 2);
    assert.equal((await messageRequests(madrid.tenantId)).length, 1);
  });

  test('quiet hours on the US spring-forward night (2026-03-08, quiet 01:00–03:30 New York time)', async () => {
    const tenant = await newTenant({ timezone: 'America/New_York', settings: { followUpMode: 'auto', quietHours: { start: '01:00', end: '03:30' } } });
    const guest = await addGuest(tenant);
    const followUp = await createFollowUp(tenant, guest, { dueAt: '2026-03-08T06:10:00Z' });
    for (const [instant, local] of [
      ['2026-03-08T06:30:00Z', '01:30 EST'],
      ['2026-03-08T06:59:00Z', '01:59 EST'],
      ['2026-03-08T07:15:00Z', '03:15 EDT'],
      ['2026-03-08T07:29:00Z', '03:29 EDT'],
    ]) {
      await runAutomationAt(instant);
      assert.equal((await read(tenant, followUp.followUpId)).status, 'scheduled', `${instant} is ${local}, inside quiet hours`);
    }
    assert.deepEqual(await messageRequests(tenant.tenantId), []);
    // 07:40Z is 03:40 EDT (a fixed EST offset would say 02:40, still quiet).
    const instant = await runAutomationAt('2026-03-08T07:40:00Z');
    const sent = await read(tenant, followUp.followUpId);
    assert.equal(sent.status, 'sent');
    assert.equal(sent.sentAt, instant.toISOString());
    assert.equal((await messageRequests(tenant.tenantId)).length, 1);
  });

  test('expiry: a follow-up past expiresAt becomes expired and is never sent', async () => {
    const tenant = await newTenant({ settings: { followUpMode: 'auto' } });
    const guest = await addGuest(tenant, { consent: false });
    const followUp = await createFollowUp(tenant, guest, dueAgo());
    const idle = await newTenant();
    const idleGuest = await addGuest(idle);
    const idleFollowUp = await createFollowUp(idle, idleGuest);

    await runAutomationIn(2 * MINUTE);
    assert.equal((await read(tenant, followUp.followUpId)).status, 'scheduled', 'no consent yet');
    // Consent arrives, but the next run is after expiresAt: the sweep comes first.
    await app.admin('PATCH', `/tenants/${tenant.tenantId}/contacts/${guest.contactId}`, { consent: true });
    const expiresAt = Date.parse(followUp.expiresAt);
    assert.ok(Date.parse(idleFollowUp.expiresAt) <= expiresAt + 2 * MINUTE);
    await runAutomationAt(new Date(Math.max(expiresAt, Date.parse(idleFollowUp.expiresAt)) + MINUTE));
    const expired = await read(tenant, followUp.followUpId);
    assert.equal(expired.status, 'expired');
    assert.equal(expired.sentAt, undefined);
    assert.equal((await read(idle, idleFollowUp.followUpId)).status, 'expired', 'expiry applies whatever the mode');
    assert.deepEqual(await messageRequests(tenant.tenantId), []);

    await runAutomationIn(2 * MINUTE);
    assert.equal((await read(tenant, followUp.followUpId)).status, 'expired');
    assert.deepEqual(await messageRequests(tenant.tenantId), []);
    const manual = await app.api(tenant.key, 'POST', `/crm/follow-ups/${followUp.followUpId}/send`, {});
    assert.equal(manual.statusCode, 409);
    assert.equal(manual.json().error.code, 'M2M_CONFLICT');
    assert.deepEqual(await messageRequests(tenant.tenantId), []);
  });

  test('a manual send racing automation never produces two messages', async () => {
    const tenant = await newTenant({ settings: { followUpMode: 'auto' } });
    // Automation sends in dueAt order; the manual sends go the other way round, so the two meet somewhere.
    const followUps: FollowUp[] = [];
    for (let i = 0; i < 16; i++) followUps.push(await createFollowUp(tenant, await addGuest(tenant, { name: `Guest ${i}` }), dueAgo((16 - i) * MINUTE)));

    const queued = await queuedRun();
    assert.ok(queued);
    const instant = new Date(Math.max(queued.run_at.getTime(), clock.now().getTime() + 2 * MINUTE));
    const manual: Awaited<ReturnType<TestApp['api']>>[] = [];
    const backwards = [...followUps].reverse();
    for (let i = 0; i < backwards.length; i += 2) {
      manual.push(...(await Promise.all(backwards.slice(i, i + 2).map((f) => app.api(tenant.key, 'POST', `/crm/follow-ups/${f.followUpId}/send`, {})))));
      if (i === 0) {
        // The run starts while the manual sends are under way.
        clock.set(instant);
        app.runtime.runner.wake();
      }
    }
    await awaitRunAt(instant);
    assert.equal(await runsSince(instant), 1, 'the run completed although some follow-ups were claimed by hand');

    assert.deepEqual(manual.slice(0, 2).map((r) => r.statusCode), [202, 202], 'sent by hand before the run started');
    for (const response of manual) assert.ok([202, 409].includes(response.statusCode), `${response.statusCode} ${response.body}`);
    for (const response of manual.filter((r) => r.statusCode === 409)) assert.equal(response.json().error.code, 'M2M_CONFLICT');
    const requests = await messageRequests(tenant.tenantId);
    assert.equal(requests.length, followUps.length, 'one message per follow-up');
    assert.equal(new Set(requests.map((r) => r.conversation_id)).size, followUps.length);
    for (const followUp of followUps) {
      const current = await read(tenant, followUp.followUpId);
      assert.equal(current.status, 'sent');
      assert.equal(requests.filter((r) => r.reply_id === current.replyId).length, 1);
    }
    const [{ n }] = await db().query<{ n: number }>(`SELECT count(*)::int AS n FROM messages WHERE tenant_id = $1 AND direction = 'outbound'`, [tenant.tenantId]);
    assert.equal(n, followUps.length);

    // And the other way round: automation finds the follow-up already sent by hand.
    const guest = await addGuest(tenant);
    const byHand = await createFollowUp(tenant, guest, dueAgo());
    assert.equal((await app.api(tenant.key, 'POST', `/crm/follow-ups/${byHand.followUpId}/send`, {})).statusCode, 202);
    await runAutomationIn(2 * MINUTE);
    assert.equal((await messageRequests(tenant.tenantId)).filter((r) => r.conversation_id === guest.conversationId).length, 1);
  });
});
