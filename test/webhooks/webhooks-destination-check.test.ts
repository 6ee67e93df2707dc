import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Resolver } from '../../src/net/guard.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { FULL_WEBHOOK_SCOPES, createSubscription, issuesOf } from '../fixtures/webhooks.js';

// Webhook destinations are resolved at create and PATCH as well as before every attempt: a host with any
// non-public answer is refused (400 naming body.url) and nothing is written. Unresolvable hosts are
// accepted (DNS may not exist yet; each attempt checks again). The DNS answers come from an injected
// resolver standing in for the machine's resolver (a hosts-file entry like `vm → 127.0.0.1`).

const answers: Record<string, Array<{ address: string; family: 4 | 6 }>> = {
  vm: [{ address: '127.0.0.1', family: 4 }],
  'mixed.example.com': [
    { address: '93.184.215.14', family: 4 },
    { address: '10.0.0.7', family: 4 },
  ],
  'v6-loopback.example.com': [
    { address: '93.184.215.14', family: 4 },
    { address: '::1', family: 6 },
  ],
  'public.example.com': [{ address: '93.184.215.14', family: 4 }],
};
const asked: string[] = [];
const resolver: Resolver = async (host) => {
  asked.push(host);
  const found = answers[host];
  if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return found;
};

let app: TestApp;
let open: TestApp;
before(async () => {
  app = await startTestApp({ resolver });
  open = await startTestApp({ resolver, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
});
after(async () => {
  await app.close();
  await open.close();
});

async function subscriptionCount(target: TestApp, tenantId: string): Promise<number> {
  const [row] = await target.runtime.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_subscriptions WHERE tenant_id = $1', [tenantId]);
  return row.n;
}

test('create refuses a host that resolves to any non-public address, and writes nothing', async () => {
  const { tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
  for (const url of ['https://vm/h', 'https://mixed.example.com/h', 'https://v6-loopback.example.com/h']) {
    const res = await app.api(key, 'POST', '/webhooks', { url, events: ['message.created'] });
    const [issue] = issuesOf(res);
    assert.equal(issue.path, 'body.url');
    assert.match(issue.message, /non-public address/);
  }
  assert.equal(await subscriptionCount(app, tenantId), 0);

  const ok = await createSubscription(app, key, { url: 'https://public.example.com/h', events: ['message.created'] });
  assert.equal(ok.url, 'https://public.example.com/h');
  const unresolved = await createSubscription(app, key, { url: 'https://not-yet.example.com/h', events: ['message.created'] });
  assert.equal(unresolved.url, 'https://not-yet.example.com/h');
  assert.equal(await subscriptionCount(app, tenantId), 2);
});

test('PATCH to such a host is refused and leaves the subscription as it was', async () => {
  const { key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
  const created = await createSubscription(app, key, { url: 'https://public.example.com/a', events: ['message.created'] });
  const res = await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { url: 'https://vm/h', description: 'moved' });
  assert.equal(issuesOf(res)[0].path, 'body.url');
  const read = await app.api(key, 'GET', `/webhooks/${created.subscriptionId}`);
  assert.equal(read.json().url, 'https://public.example.com/a');
  assert.equal(read.json().description, undefined);
});

test('UNSAFE_ALLOW_PRIVATE_DESTINATIONS skips the check without asking DNS', async () => {
  const { key } = await open.tenantWithKey(FULL_WEBHOOK_SCOPES);
  asked.length = 0;
  const created = await createSubscription(open, key, { url: 'https://vm/h', events: ['message.created'] });
  assert.equal(created.url, 'https://vm/h');
  assert.deepEqual(asked, []);
});
