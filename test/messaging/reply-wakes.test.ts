import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openDb, type Db } from '../../src/db/driver.js';
import { jobsChannel } from '../../src/jobs/queue.js';
import { SEND_TASK } from '../../src/messaging/outbound.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { inbound } from '../helpers/inbox.js';

// A reply commits on its own (one statement, no transaction of ours around it), so its wake-ups are pg_notify
// calls inside the statement: another node's workers (here a second connection pool on the same schema, as a
// worker node would open) must hear of the send job at once, not at their next poll.

const url = process.env.DATABASE_URL;
let app: TestApp;
let otherNode: Db | undefined;

before(async () => {
  app = await startTestApp({ startWorkers: false });
  if (url) otherNode = await openDb({ databaseUrl: url, schema: app.runtime.services.db.schema, dataDir: '', poolSize: 1 });
});
after(async () => {
  await otherNode?.close();
  await app.close();
});

test('a reply wakes the send workers of another node', { skip: url ? false : 'PostgreSQL only: PGlite has a single process' }, async () => {
  const node = otherNode;
  assert.ok(node);
  const tenant = await app.tenantWithKey(['conversations:write']);
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenant.tenantId}/channels`, { kind: 'webchat', name: 'Web' });
  const { conversationId } = await inbound(app, tenant.tenantId, channelId, { handle: 'guest' });

  let woke!: () => void;
  const woken = new Promise<void>((resolve) => (woke = resolve));
  await node.listen(jobsChannel(SEND_TASK), () => woke());
  const res = await app.api(tenant.key, 'POST', `/conversations/${conversationId}/messages`, { text: 'Hello' }, { 'idempotency-key': 'wake' });
  assert.equal(res.statusCode, 202, res.body);
  await Promise.race([woken, new Promise((_, reject) => setTimeout(() => reject(new Error('the other node was not woken within 5 s')), 5_000))]);
});
