import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { M2MClient } from '../../packages/client/src/index.js';
import { createAutoReplier, HANDOVER_LINE, type Outcome } from '../../packages/client/examples/auto-reply.js';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { inbound } from '../helpers/inbox.js';
import { finished } from '../fixtures/site/helpers.js';
import { HOTEL_PAGES, startHotelSite } from '../fixtures/hotel-site/site.js';
import type { FixtureSite } from '../fixtures/site/server.js';

// The example is the proof (issue 44): the auto-reply example, with its default composer, answers a guest's
// question from the fixture hotel website crawled by the real crawler (the best passage and its link), adds the
// guest's linked reservation when the question is about the stay, and hands over with a fixed line when nothing
// in the knowledge answers.

let app: TestApp;
let site: FixtureSite;
let replier: ReturnType<typeof createAutoReplier>;
const outcomes: Outcome[] = [];
let world: { tenantId: string; key: string; channelId: string; client: M2MClient };

const GUEST_PHONE = '+34612345678';

before(async () => {
  site = await startHotelSite();
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '50,50,50,50,50,50' } });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}/m2m/v1`;
  const tenant = await app.tenantWithKey(['webhooks:write', 'conversations:write', 'messages:read', 'knowledge:read', 'knowledge:write', 'reservations:read']);

  const crawl = await app.api(tenant.key, 'POST', '/knowledge/url/crawl', { rootUrl: `${site.origin}/en/`, crawlDepth: 3, maxPages: 100 });
  assert.equal(crawl.statusCode, 202, crawl.body);
  const { job } = await finished(app, tenant.key, crawl.json().job.jobId, 60_000);
  assert.equal(job.status, 'completed', JSON.stringify(job));
  assert.equal(job.snapshotPages, HOTEL_PAGES.length);

  // The guest's reservation, mirrored from the PMS; it is linked to their conversation by phone.
  const integration = await app.admin<{ integrationId: string }>('POST', `/tenants/${tenant.tenantId}/integrations`, { provider: 'pms', name: 'Front desk PMS' });
  const synced = await app.adminRaw('PUT', `/tenants/${tenant.tenantId}/integrations/${integration.integrationId}/reservations/R-2031-77`, {
    status: 'confirmed',
    checkInDate: '2031-07-01',
    checkOutDate: '2031-07-04',
    bookedAt: '2031-01-01T10:00:00.000Z',
    guestFullName: 'Ana López',
    guestPhone: GUEST_PHONE,
  });
  assert.equal(synced.statusCode, 201, synced.body);

  const channelId = (await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp' })).channelId;
  const client = new M2MClient({ apiKey: tenant.key, baseUrl });
  const subscription = await client.webhooks.create({ url: 'http://127.0.0.1:9/placeholder', events: ['message.created'] });
  // The example as it ships: no compose given, so it answers from the knowledge.
  replier = createAutoReplier({ client, secret: subscription.secret!, onOutcome: (outcome) => outcomes.push(outcome) });
  await new Promise<void>((resolve) => replier.listen(0, '127.0.0.1', resolve));
  await client.webhooks.update({ subscriptionId: subscription.subscriptionId, url: `http://127.0.0.1:${(replier.address() as AddressInfo).port}/hook` });
  world = { ...tenant, channelId, client };
});
after(async () => {
  replier.closeAllConnections();
  await new Promise<void>((resolve) => replier.close(() => resolve()));
  await app.close();
  await site.close();
});

/** A guest writes; the example's reply to that message. */
async function ask(contact: { name: string; phone: string }, text: string): Promise<string> {
  const guest = await inbound(app, world.tenantId, world.channelId, contact, text);
  const replied = await eventually(async () => outcomes.find((o) => o.action === 'replied' && o.messageId === guest.messageId), 20_000, `the reply to ${text}`);
  assert.equal(replied.action, 'replied');
  const { messages } = await world.client.conversations.messages.list({ conversationId: guest.conversationId, direction: 'outbound' });
  const reply = messages.find((m) => replied.action === 'replied' && m.messageId === replied.replyId) ?? messages.at(-1);
  assert.ok(reply?.text, 'the reply has text');
  return reply.text;
}

test('a question is answered with the best passage and its link', async () => {
  const reply = await ask({ name: 'Tom', phone: '+447911123456' }, 'Can I bring my dog?');
  assert.match(reply, new RegExp(`More: ${site.origin}/en/pets\\b`));
  assert.match(reply, /dog/i);
  assert.doesNotMatch(reply, /Your reservation/, 'a question not about the stay gets no reservation');
});

test('a question about the stay adds the guest’s linked reservation and its check-in date', async () => {
  const reply = await ask({ name: 'Ana', phone: GUEST_PHONE }, 'What time is check-in when we arrive?');
  assert.match(reply, /Your reservation R-2031-77: check-in on 2031-07-01/);
  assert.match(reply, new RegExp(`More: ${site.origin}/en/check-in-check-out\\b`));

  const spanish = await ask({ name: 'Ana', phone: GUEST_PHONE }, '¿A qué hora es la entrada a la habitación?');
  assert.match(spanish, /check-in on 2031-07-01/);
  assert.match(spanish, new RegExp(`${site.origin}/es/`), 'a Spanish question finds a Spanish page');
});

test('nothing scores above the threshold: it hands over with the fixed line', async () => {
  for (const text of ['Do you know a good dentist nearby?', '?!', '🙂🙂']) {
    assert.equal(await ask({ name: 'Lee', phone: '+525540000002' }, text), HANDOVER_LINE, text);
  }
});
