import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { inbound, monotonicClock } from '../helpers/inbox.js';
import { errorOf, phone, reply, world, written } from '../helpers/replies.js';

// Replies refused before anything is written: a bad body or a missing Idempotency-Key (400), a conversation that is
// not the tenant's (404), a contact who opted out (409), a channel that is unavailable (400).
// The 24-hour window has its own file (reply-window.test.ts).

let app: TestApp;
let seq = 0;

before(async () => {
  app = await startTestApp({ startWorkers: true, clock: monotonicClock() });
});
after(() => app.close());

test('bad replies are 400 and write nothing', async () => {
  const w = await world(app, 'webchat');
  const first = await inbound(app, w.tenantId, w.channelId, { handle: `v-${++seq}` });
  const before = await written(app, w.tenantId);
  errorOf(await reply(app, w.key, first.conversationId, { text: '' }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(app, w.key, first.conversationId, { text: '   ' }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(app, w.key, first.conversationId, { text: 'x'.repeat(4097) }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(app, w.key, first.conversationId, { text: 'hi', extra: 1 }), 400, 'M2M_INVALID_REQUEST');
  errorOf(await reply(app, w.key, first.conversationId, { text: 'hi' }, null), 400, 'M2M_INVALID_REQUEST');
  assert.deepEqual(await written(app, w.tenantId), before);
  assert.equal((await reply(app, w.key, first.conversationId, { text: 'x'.repeat(4096) })).statusCode, 202);
});

test('a reply to an unknown or foreign conversation is 404 and writes nothing', async () => {
  const w = await world(app, 'webchat');
  const other = await world(app, 'webchat');
  const theirs = await inbound(app, other.tenantId, other.channelId, { handle: `c-${++seq}` });
  const before = await written(app, w.tenantId);
  errorOf(await reply(app, w.key, theirs.conversationId, { text: 'hi' }), 404, 'M2M_NOT_FOUND');
  assert.equal((await written(app, other.tenantId)).messages, 1);
  errorOf(await reply(app, w.key, 'nope', { text: 'hi' }), 404, 'M2M_NOT_FOUND');
  assert.deepEqual(await written(app, w.tenantId), before);
});

test('a reply to a contact who opted out is 409 and writes nothing', async () => {
  const w = await world(app, 'whatsapp');
  const open = await inbound(app, w.tenantId, w.channelId, { phone: phone() }, 'are you there?');
  await app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${open.contactId}`, { optedOut: true });
  const before = await written(app, w.tenantId);
  assert.equal(errorOf(await reply(app, w.key, open.conversationId, { text: 'hi' }), 409, 'M2M_CONFLICT').reason, 'recipient_opted_out');
  assert.deepEqual(await written(app, w.tenantId), before);
});

test('a reply through an unavailable channel is 400 and writes nothing', async () => {
  const down = await world(app, 'whatsapp', { available: false });
  const stuck = await inbound(app, down.tenantId, down.channelId, { phone: phone() });
  const unavailable = errorOf(await reply(app, down.key, stuck.conversationId, { text: 'hi' }), 400, 'M2M_INVALID_REQUEST');
  assert.equal(unavailable.reason, 'channel_unavailable');
  assert.equal((await written(app, down.tenantId)).messages, 1);
});
