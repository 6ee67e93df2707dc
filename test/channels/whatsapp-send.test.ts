import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startFakeGraph, type FakeGraph } from '../helpers/fake-graph.js';

// Replies through the channel's provider against the fake Graph API: Graph errors mapped per decisions 7.1
// (`whatsapp_<code>`), throttling retried with backoff and sent once, 131047 closing the window, a refused token
// marking the connection failing.

const TOKEN = 'whatsapp-send-token';
let app: TestApp;
let graph: FakeGraph;
let seq = 0;

before(async () => {
  graph = await startFakeGraph();
  app = await startTestApp({ startWorkers: true, env: { META_SYSTEM_USER_TOKEN: TOKEN, META_GRAPH_BASE_URL: graph.baseUrl, SEND_MAX_ATTEMPTS: '4' } });
});
after(async () => {
  await app.close();
  await graph.close();
});

async function conversation() {
  const { tenantId, key } = await app.tenantWithKey(['conversations:read', 'conversations:write', 'messages:read']);
  const phoneNumberId = String(106540352300000 + ++seq);
  graph.addWhatsAppNumber({ phoneNumberId, wabaId: '102290129340398', token: TOKEN });
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, {
    kind: 'whatsapp',
    name: 'Cloud',
    provider: 'whatsapp_cloud',
    connection: { phoneNumberId, wabaId: '102290129340398' },
  });
  // The channel's first template sync (queued at creation) is a Graph call too: let it pass before injecting failures.
  await eventually(
    async () => (await app.runtime.services.db.query(`SELECT 1 FROM jobs WHERE task = 'channels.template-sync' AND payload->>'channelId' = $1 AND state = 'succeeded'`, [channelId])).length > 0,
    20_000,
    'the first template sync',
  );
  const { conversationId } = await app.admin<{ conversationId: string }>('POST', `/tenants/${tenantId}/inbound-messages`, { channelId, contact: { phone: '+14155550100' }, text: 'Hi 👋' });
  return { tenantId, key, channelId, phoneNumberId, conversationId };
}

async function reply(key: string, conversationId: string, text: string) {
  const res = await app.api(key, 'POST', `/conversations/${conversationId}/messages`, { text }, { 'idempotency-key': randomUUID() });
  return res;
}

async function finalStatus(key: string, requestEventId: string) {
  return eventually(
    async () => {
      const res = await app.api(key, 'GET', `/message-requests/${requestEventId}/status`);
      const body = res.json() as { status: string; error?: { code: string; message: string } };
      return body.status === 'sent' || body.status === 'failed' ? body : undefined;
    },
    30_000,
    'a final status',
  );
}

test('130429 (throughput) is retried with backoff and the message goes out once', async () => {
  const c = await conversation();
  graph.failNext(1, { status: 400, code: 130429, message: '(#130429) Rate limit hit' });
  const res = await reply(c.key, c.conversationId, 'Your room is ready 🛏️');
  assert.equal(res.statusCode, 202, res.body);
  const status = await finalStatus(c.key, (res.json() as { requestEventId: string }).requestEventId);
  assert.equal(status.status, 'sent');
  const sent = graph.sent(c.phoneNumberId, 'messages');
  assert.deepEqual(sent.map((r) => r.status), [400, 200]);
  assert.deepEqual(sent[1].json, { messaging_product: 'whatsapp', recipient_type: 'individual', to: '14155550100', type: 'text', text: { body: 'Your room is ready 🛏️', preview_url: false } });
});

test('131047 (re-engagement) fails the send as whatsapp_131047 and closes the customer-service window', async () => {
  const c = await conversation();
  graph.failNext(1, { status: 400, code: 131047, message: 'Re-engagement message' });
  const res = await reply(c.key, c.conversationId, 'Hello again');
  const status = await finalStatus(c.key, (res.json() as { requestEventId: string }).requestEventId);
  assert.equal(status.status, 'failed');
  assert.equal(status.error?.code, 'whatsapp_131047');
  assert.equal(graph.sent(c.phoneNumberId, 'messages').length, 1);
  const refused = await reply(c.key, c.conversationId, 'Are you there?');
  assert.equal(refused.statusCode, 409, refused.body);
  assert.equal((refused.json() as { error: { details: { reason: string } } }).error.details.reason, 'outside_customer_service_window');
  // The guest writes again: a new window opens.
  await app.admin('POST', `/tenants/${c.tenantId}/inbound-messages`, { channelId: c.channelId, contact: { phone: '+14155550100' }, text: 'yes' });
  assert.equal((await reply(c.key, c.conversationId, 'Great')).statusCode, 202);
});

test('a refused token (190) is final and marks the connection failing with its last error', async () => {
  const c = await conversation();
  graph.failNext(1, { status: 401, code: 190, message: 'Invalid OAuth access token' });
  const res = await reply(c.key, c.conversationId, 'Hola');
  const status = await finalStatus(c.key, (res.json() as { requestEventId: string }).requestEventId);
  assert.equal(status.error?.code, 'whatsapp_190');
  const channel = await app.admin<{ connection: { status: string; lastError?: { code: string } } }>('PATCH', `/tenants/${c.tenantId}/channels/${c.channelId}`, { name: 'Cloud' });
  assert.equal(channel.connection.status, 'failing');
  assert.equal(channel.connection.lastError?.code, 'whatsapp_190');
});

test('template sync: a new whatsapp_cloud channel learns readiness from Meta (APPROVED is ready, lastFetchedAt real), and a start sends the template with its body parameter', async () => {
  const { tenantId, key } = await app.tenantWithKey(['conversations:read', 'conversations:write', 'messages:read']);
  const phoneNumberId = String(106540352300000 + ++seq);
  const wabaId = String(202290129340000 + seq);
  graph.addWhatsAppNumber({ phoneNumberId, wabaId, token: TOKEN });
  graph.setTemplates(wabaId, [
    { name: 'guest_welcome', language: 'en_US', status: 'APPROVED', category: 'UTILITY' },
    { name: 'guest_welcome', language: 'es_MX', status: 'PENDING', category: 'UTILITY' },
  ]);
  const before = Date.now();
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'Cloud', provider: 'whatsapp_cloud', connection: { phoneNumberId, wabaId } });
  const readiness = await eventually(
    async () => {
      const res = await app.api(key, 'GET', `/conversations/start/whatsapp-template-status?channelId=${channelId}`);
      const body = res.json() as { templateName?: string; locales: Array<{ locale: string; status: string; ready: boolean; lastFetchedAt?: string }> };
      return body.templateName ? body : undefined;
    },
    20_000,
    'templates synced',
  );
  assert.equal(readiness.templateName, 'guest_welcome');
  const en = readiness.locales.find((l) => l.locale === 'en_US');
  const es = readiness.locales.find((l) => l.locale === 'es_MX');
  assert.equal(en?.ready, true);
  assert.equal(en?.status, 'approved');
  assert.equal(es?.ready, false);
  assert.equal(es?.status, 'pending');
  assert.ok(en?.lastFetchedAt && Date.parse(en.lastFetchedAt) >= before - 1000);

  await app.admin('POST', `/tenants/${tenantId}/contacts`, { phone: '+14155550177', consent: true });
  const start = await app.api(key, 'POST', '/conversations/start', { channelId, recipientPhone: '+14155550177', locale: 'en_US', messageText: 'Ana 🌞' }, { 'idempotency-key': randomUUID() });
  assert.equal(start.statusCode, 202, start.body);
  const sent = await eventually(async () => graph.sent(phoneNumberId, 'messages')[0], 20_000, 'the template at the Graph API');
  assert.deepEqual(sent.json, {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    to: '14155550177',
    type: 'template',
    template: { name: 'guest_welcome', language: { code: 'en_US' }, components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ana 🌞' }] }] },
  });
});
