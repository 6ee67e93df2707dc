import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { inbound, monotonicClock } from '../helpers/inbox.js';
import { errorOf, HOUR, phone, reply, world, written } from '../helpers/replies.js';

// The customer-service window: on WhatsApp, Messenger and Instagram a reply is allowed only within 24 hours of
// the contact's last message (409 outside_customer_service_window, writing nothing); webchat has no window.

let app: TestApp;
let seq = 0;

before(async () => {
  app = await startTestApp({ startWorkers: true, clock: monotonicClock() });
});
after(() => app.close());

test("WhatsApp's 24-hour window is refused up front, writing nothing; a new inbound message opens it again", async () => {
  const w = await world(app, 'whatsapp');
  const guest = phone();
  const old = await app.admin<{ conversationId: string; contactId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, {
    channelId: w.channelId,
    contact: { phone: guest },
    text: 'old',
    receivedAt: new Date(Date.now() - 25 * HOUR).toISOString(),
  });
  const before = await written(app, w.tenantId);
  const details = errorOf(await reply(app, w.key, old.conversationId, { text: 'late' }, 'window-key'), 409, 'M2M_CONFLICT');
  assert.equal(details.reason, 'outside_customer_service_window');
  assert.deepEqual(await written(app, w.tenantId), before, 'nothing written, the key released');

  // A new inbound message opens the window again; the released key is usable.
  await inbound(app, w.tenantId, w.channelId, { phone: guest }, 'are you there?');
  assert.equal((await reply(app, w.key, old.conversationId, { text: 'late' }, 'window-key')).statusCode, 202);

  // Within the window by a minute: allowed.
  const recent = await app.admin<{ conversationId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, {
    channelId: w.channelId, contact: { phone: phone() }, text: 'x', receivedAt: new Date(Date.now() - 23 * HOUR - 59 * 60_000).toISOString(),
  });
  assert.equal((await reply(app, w.key, recent.conversationId, { text: 'hi' })).statusCode, 202);
});

test('a WhatsApp conversation started with a template, where the contact never wrote, has no open window', async () => {
  const w = await world(app, 'whatsapp');
  await app.admin('PUT', `/tenants/${w.tenantId}/channels/${w.channelId}/templates/conversation_start`, { category: 'UTILITY', locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
  const guest = phone();
  await app.admin('POST', `/tenants/${w.tenantId}/contacts`, { phone: guest, consent: true });
  const started = await app.api(w.key, 'POST', '/conversations/start', { channelId: w.channelId, recipientPhone: guest, locale: 'en_US', messageText: 'Welcome' }, { 'idempotency-key': 'start' });
  assert.equal(started.statusCode, 202, started.body);
  const details = errorOf(await reply(app, w.key, started.json().conversationId, { text: 'hi' }), 409, 'M2M_CONFLICT');
  assert.equal(details.reason, 'outside_customer_service_window');
  assert.equal(details.lastInboundAt, undefined);
});

test('Messenger and Instagram have a 24-hour window too; webchat has none', async () => {
  const old = new Date(Date.now() - 48 * HOUR).toISOString();
  for (const [kind, allowed] of [['messenger', false], ['instagram', false], ['webchat', true]] as const) {
    const w = await world(app, kind);
    const conv = await app.admin<{ conversationId: string }>('POST', `/tenants/${w.tenantId}/inbound-messages`, { channelId: w.channelId, contact: { handle: `h-${++seq}` }, text: 'x', receivedAt: old });
    const res = await reply(app, w.key, conv.conversationId, { text: 'hi' });
    if (allowed) assert.equal(res.statusCode, 202, `${kind}: ${res.body}`);
    else assert.equal(errorOf(res, 409, 'M2M_CONFLICT').reason, 'outside_customer_service_window', kind);
  }
});
