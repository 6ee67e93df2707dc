import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../helpers/app.js';
import { guestWrites, reason, startKinds, world, type KindsHarness } from '../helpers/kinds-world.js';

// Read receipts and typing (decisions 7.2): marking a conversation read queues the channel's read receipt for the
// newest inbound message (WhatsApp status read), and a receipt that fails never fails the mark-read; POST /typing
// is 202 and sends WhatsApp's typing indicator with that read receipt, 409 outside the customer-service window.

const SCOPES = ['conversations:read', 'conversations:write', 'conversations:triage:write', 'messages:read'];
let h: KindsHarness;
before(async () => {
  h = await startKinds();
});
after(async () => {
  await h.close();
});

async function receiptJobs(conversationId: string) {
  return h.app.runtime.services.db.query<{ state: string; attempts: number }>(
    `SELECT state, attempts FROM jobs WHERE task = 'messaging.receipt' AND payload->>'conversationId' = $1 ORDER BY id`,
    [conversationId],
  );
}

test('mark-read queues the read receipt of the newest inbound message, sent as WhatsApp status read', async () => {
  const w = await world(h, SCOPES);
  const { wamid: newest } = await guestWrites(h, w, 'y ¿a qué hora es el check-in? 🕒');
  const res = await h.app.api(w.key, 'POST', `/conversations/${w.conversationId}/read`);
  assert.equal(res.statusCode, 200, res.body);
  assert.equal((res.json() as { changed: boolean }).changed, true);
  const sent = await eventually(async () => h.graph.sent(w.phoneNumberId, 'messages')[0], 20_000, 'the read receipt');
  assert.deepEqual(sent.json, { messaging_product: 'whatsapp', status: 'read', message_id: newest });
  assert.equal(sent.status, 200);
  // Marking it read again changes nothing and queues nothing.
  await h.app.api(w.key, 'POST', `/conversations/${w.conversationId}/read`);
  assert.equal((await receiptJobs(w.conversationId)).length, 1);
});

test('a read receipt the provider refuses never fails the mark-read: 200 at once, the job ends after its attempts', async () => {
  const w = await world(h, SCOPES);
  h.graph.failNext(3, { status: 500, code: 2, message: 'Service temporarily unavailable', edge: 'messages' });
  const res = await h.app.api(w.key, 'POST', `/conversations/${w.conversationId}/read`);
  assert.equal(res.statusCode, 200, res.body);
  assert.equal((res.json() as { unreadCountAfter: number }).unreadCountAfter, 0);
  const jobs = await eventually(async () => {
    const rows = await receiptJobs(w.conversationId);
    return rows.length === 1 && rows[0].state === 'succeeded' ? rows : undefined;
  }, 60_000, 'the receipt job done');
  assert.equal(jobs[0].attempts, 3);
  assert.deepEqual(h.graph.sent(w.phoneNumberId, 'messages').map((r) => r.status), [500, 500, 500]);
  const conversation = (await h.app.api(w.key, 'GET', `/conversations/${w.conversationId}`)).json() as { unreadCount: number };
  assert.equal(conversation.unreadCount, 0);
});

test('typing: 202, sent as the read receipt of the newest inbound message with the typing indicator', async () => {
  const w = await world(h, SCOPES);
  const res = await h.app.api(w.key, 'POST', `/conversations/${w.conversationId}/typing`);
  assert.equal(res.statusCode, 202, res.body);
  assert.deepEqual(res.json(), { conversationId: w.conversationId, queued: true });
  const sent = await eventually(async () => h.graph.sent(w.phoneNumberId, 'messages')[0], 20_000, 'the typing indicator');
  assert.deepEqual(sent.json, { messaging_product: 'whatsapp', status: 'read', message_id: w.inboundWamid, typing_indicator: { type: 'text' } });
});

test('typing outside the customer-service window is 409 outside_customer_service_window and queues nothing; unknown conversation 404', async () => {
  const w = await world(h, SCOPES);
  await h.app.runtime.services.db.query(`UPDATE conversations SET last_inbound_at = now() - interval '25 hours' WHERE id = $1`, [w.conversationId]);
  const res = await h.app.api(w.key, 'POST', `/conversations/${w.conversationId}/typing`);
  assert.equal(res.statusCode, 409, res.body);
  assert.equal(reason(res), 'outside_customer_service_window');
  assert.equal((await receiptJobs(w.conversationId)).length, 0);
  assert.equal((await h.app.api(w.key, 'POST', '/conversations/cnv_missing/typing')).statusCode, 404);
});

test('typing to a contact who opted out is 409 recipient_opted_out and queues nothing', async () => {
  const w = await world(h, SCOPES);
  const [{ contact_id: contactId }] = await h.app.runtime.services.db.query<{ contact_id: string }>('SELECT contact_id FROM conversations WHERE id = $1', [w.conversationId]);
  await h.app.admin('PATCH', `/tenants/${w.tenantId}/contacts/${contactId}`, { optedOut: true });
  const res = await h.app.api(w.key, 'POST', `/conversations/${w.conversationId}/typing`);
  assert.equal(res.statusCode, 409, res.body);
  assert.equal(reason(res), 'recipient_opted_out');
  assert.equal((await receiptJobs(w.conversationId)).length, 0);
});
