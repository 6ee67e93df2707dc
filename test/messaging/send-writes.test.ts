import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { inbound } from '../helpers/inbox.js';
import { jobRepo } from '../../src/jobs/job-repo.js';
import { messageRequestRepo, type AcceptedSend } from '../../src/messaging/repo.js';

// The send job's grouped writes (message_sends_accepted), called directly with no workers running: the dispatch start
// and the accepted sends keep the rules of the statements they replaced (fenced by the job's lease, status only
// forward, nothing written for a request that is gone).

let app: TestApp;
before(async () => {
  app = await startTestApp();
});
after(() => app.close());

const db = () => app.runtime.services.db;

/** A queued reply, and its send job leased to `workerId`. */
async function queuedSend(workerId: string) {
  const tenant = await app.tenantWithKey(['conversations:write']);
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'webchat', name: 'Web' });
  const first = await inbound(app, tenant.tenantId, channelId, { handle: `guest-${workerId}` });
  const res = await app.api(tenant.key, 'POST', `/conversations/${first.conversationId}/messages`, { text: 'Hello' }, { 'idempotency-key': `k-${workerId}` });
  assert.equal(res.statusCode, 202, res.body);
  const requestId = (res.json() as { requestEventId: string }).requestEventId;
  const now = new Date();
  const claimed = await jobRepo.claim(db(), { workerId, leaseUntil: new Date(now.getTime() + 60_000), now, tasks: ['messaging.send'], limit: 10, running: [] });
  const job = claimed.find((row) => (row.payload as { requestEventId?: string }).requestEventId === requestId);
  assert.ok(job, 'the send job is claimed');
  return { tenantId: tenant.tenantId, requestId, jobId: job.id };
}

function accepted(send: { tenantId: string; requestId: string; jobId: number }, workerId: string, eventId: string): AcceptedSend {
  return {
    tenantId: send.tenantId,
    requestId: send.requestId,
    providerMessageId: `sbx_${eventId}`,
    at: new Date(),
    jobId: send.jobId,
    workerId,
    eventId,
    eventBody: JSON.stringify({ eventId }),
    eventReadScope: 'messages:read',
    eventWriteScope: 'conversations:write',
  };
}

async function state(send: { tenantId: string; requestId: string; jobId: number }) {
  const [request] = await db().query<{ status: string; provider_message_id: string | null }>('SELECT status, provider_message_id FROM message_requests WHERE id = $1', [send.requestId]);
  const [job] = await db().query<{ state: string }>('SELECT state FROM jobs WHERE id = $1', [send.jobId]);
  const events = await db().query<{ id: string }>(`SELECT id FROM webhook_events WHERE tenant_id = $1 AND type = 'message.delivery.updated'`, [send.tenantId]);
  return { status: request.status, providerMessageId: request.provider_message_id, job: job.state, sentEvents: events.length };
}

test('a dispatch start named twice in one group starts once', async () => {
  const send = await queuedSend('w-dispatch');
  const at = new Date();
  const [first, second] = await messageRequestRepo.startDispatches(db(), [
    { tenantId: send.tenantId, id: send.requestId, at },
    { tenantId: send.tenantId, id: send.requestId, at },
  ]);
  assert.equal(first?.id, send.requestId);
  assert.equal(second, undefined, 'its second time may not dispatch');
  const [again] = await messageRequestRepo.startDispatches(db(), [{ tenantId: send.tenantId, id: send.requestId, at }]);
  assert.equal(again, undefined, 'a call under way is not started again');
});

test('accepted sends are fenced by the lease, move only from queued, and write nothing for a request that is gone', async () => {
  const mine = await queuedSend('w-a');
  const [lost] = await messageRequestRepo.recordSendsAccepted(db(), [accepted(mine, 'w-other', 'evt_lost')], 'test.webhooks');
  assert.equal(lost.outcome, 'lease_lost');
  assert.deepEqual(await state(mine), { status: 'queued', providerMessageId: null, job: 'running', sentEvents: 0 }, 'nothing written');

  const moved = await queuedSend('w-b');
  await db().query(`UPDATE message_requests SET status = 'delivered' WHERE id = $1`, [moved.requestId]);
  const gone = { ...moved, requestId: 'mrq_missing' };
  const outcomes = await messageRequestRepo.recordSendsAccepted(
    db(),
    [accepted(mine, 'w-a', 'evt_sent'), accepted(moved, 'w-b', 'evt_unchanged'), accepted(gone, 'w-b', 'evt_gone')],
    'test.webhooks',
  );
  assert.deepEqual(outcomes.map((o) => o.outcome), ['sent', 'unchanged', 'missing'], 'one outcome per send, in their order');
  assert.deepEqual(await state(mine), { status: 'sent', providerMessageId: 'sbx_evt_sent', job: 'succeeded', sentEvents: 1 });
  // A status that moved on stays; the provider's id is recorded and the job done; no event for a move that did not happen.
  assert.deepEqual(await state(moved), { status: 'delivered', providerMessageId: 'sbx_evt_unchanged', job: 'succeeded', sentEvents: 0 });
});
