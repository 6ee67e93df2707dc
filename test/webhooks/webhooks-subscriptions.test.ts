import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import {
  FULL_WEBHOOK_SCOPES,
  addKey,
  createSubscription,
  emitEvent,
  expectError,
  issuesOf,
  type DeliveryBody,
  type SubscriptionBody,
} from '../fixtures/webhooks.js';

// Subscriptions CRUD, permissions, URL rules and the delivery list's paging. No workers run here: the
// deliveries the paging tests look at stay pending, and no URL is ever contacted.

const SUBSCRIPTION_FIELDS = ['subscriptionId', 'url', 'events', 'active', 'ownerApiKeyId', 'createdAt', 'updatedAt', 'health'];
const sorted = (values: readonly string[]) => [...values].sort();

describe('webhook subscriptions', () => {
  const clock = new ManualClock('2026-03-02T10:00:00.000Z');
  let app: TestApp;
  let tenantId: string;
  let key: string;
  let apiKeyId: string;

  before(async () => {
    app = await startTestApp({ clock, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
    ({ tenantId, key, apiKeyId } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES));
  });
  after(() => app.close());

  const tick = () => clock.advance(1_000);

  test('create: 201 with every field, the owner key and a whsec_ secret', async () => {
    const response = await app.api(key, 'POST', '/webhooks', {
      url: 'https://hooks.example.com/in',
      events: ['message.created', 'message.delivery.updated'],
      description: 'primary endpoint',
    });
    assert.equal(response.statusCode, 201, response.body);
    const body = response.json() as SubscriptionBody;
    assert.deepEqual(sorted(Object.keys(body)), sorted([...SUBSCRIPTION_FIELDS, 'description', 'secret']));
    assert.match(body.subscriptionId, /\S/);
    assert.equal(body.url, 'https://hooks.example.com/in');
    assert.deepEqual(body.events, ['message.created', 'message.delivery.updated']);
    assert.equal(body.active, true);
    assert.equal(body.description, 'primary endpoint');
    assert.equal(body.ownerApiKeyId, apiKeyId);
    assert.equal(body.createdAt, clock.now().toISOString());
    assert.equal(body.updatedAt, body.createdAt);
    assert.match(body.secret ?? '', /^whsec_.{20,}$/);
  });

  test('create: active false and no description are accepted; the secret differs per subscription', async () => {
    const a = await createSubscription(app, key, { url: 'https://hooks.example.com/a', events: ['crm.opportunity.created'], active: false });
    const b = await createSubscription(app, key, { url: 'https://hooks.example.com/b', events: ['crm.opportunity.created'] });
    assert.equal(a.active, false);
    assert.equal('description' in a, false);
    assert.deepEqual(sorted(Object.keys(a)), sorted([...SUBSCRIPTION_FIELDS, 'secret']));
    assert.notEqual(a.secret, b.secret);
    assert.notEqual(a.subscriptionId, b.subscriptionId);
  });

  test('GET and list never include the secret', async () => {
    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/read', events: ['message.created'] });
    const one = await app.api(key, 'GET', `/webhooks/${created.subscriptionId}`);
    assert.equal(one.statusCode, 200, one.body);
    const { secret: _secret, ...withoutSecret } = created;
    assert.deepEqual(one.json(), withoutSecret);
    assert.equal(one.body.includes('whsec_'), false);

    const list = await app.api(key, 'GET', '/webhooks');
    assert.equal(list.statusCode, 200, list.body);
    const body = list.json() as { subscriptions: SubscriptionBody[] };
    assert.deepEqual(Object.keys(body), ['subscriptions']);
    assert.ok(body.subscriptions.some((s) => s.subscriptionId === created.subscriptionId));
    for (const item of body.subscriptions) assert.equal('secret' in item, false, `list item ${item.subscriptionId} carries a secret`);
    assert.equal(list.body.includes('whsec_'), false);
  });

  test('rotate-secret returns a new, different secret; reads still hide it', async () => {
    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/rotate', events: ['message.created'] });
    tick();
    const rotated = await app.api(key, 'POST', `/webhooks/${created.subscriptionId}/rotate-secret`);
    assert.equal(rotated.statusCode, 200, rotated.body);
    const body = rotated.json() as SubscriptionBody;
    assert.match(body.secret ?? '', /^whsec_/);
    assert.notEqual(body.secret, created.secret);
    assert.equal(body.subscriptionId, created.subscriptionId);
    assert.equal(body.url, created.url);
    assert.deepEqual(body.events, created.events);
    assert.equal(body.updatedAt, clock.now().toISOString());
    const again = await app.api(key, 'POST', `/webhooks/${created.subscriptionId}/rotate-secret`);
    assert.notEqual((again.json() as SubscriptionBody).secret, body.secret);
    const read = await app.api(key, 'GET', `/webhooks/${created.subscriptionId}`);
    assert.equal('secret' in (read.json() as SubscriptionBody), false);

    const unknown = await app.api(key, 'POST', '/webhooks/whk_does_not_exist/rotate-secret');
    expectError(unknown, 404, 'M2M_NOT_FOUND');
  });

  test('PATCH changes only the supplied fields and makes the calling key the owner', async () => {
    const second = await addKey(app, tenantId, ['webhooks:write', 'conversations:read', 'messages:read'], 'second');
    const created = await createSubscription(app, key, {
      url: 'https://hooks.example.com/patch',
      events: ['message.created', 'message.delivery.updated'],
      description: 'keep me',
    });
    assert.equal(created.ownerApiKeyId, apiKeyId);

    tick();
    const disabled = await app.api(second.key, 'PATCH', `/webhooks/${created.subscriptionId}`, { active: false });
    assert.equal(disabled.statusCode, 200, disabled.body);
    const afterActive = disabled.json() as SubscriptionBody;
    assert.equal('secret' in afterActive, false);
    assert.equal(afterActive.active, false);
    assert.equal(afterActive.url, created.url);
    assert.deepEqual(afterActive.events, created.events);
    assert.equal(afterActive.description, 'keep me');
    assert.equal(afterActive.ownerApiKeyId, second.apiKeyId);
    assert.equal(afterActive.createdAt, created.createdAt);
    assert.equal(afterActive.updatedAt, clock.now().toISOString());
    assert.notEqual(afterActive.updatedAt, created.updatedAt);

    tick();
    const narrowed = await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { events: ['message.created'] });
    assert.equal(narrowed.statusCode, 200, narrowed.body);
    const afterEvents = narrowed.json() as SubscriptionBody;
    assert.deepEqual(afterEvents.events, ['message.created']);
    assert.equal(afterEvents.active, false, 'active was not supplied and stays false');
    assert.equal(afterEvents.url, created.url);
    assert.equal(afterEvents.description, 'keep me');
    assert.equal(afterEvents.ownerApiKeyId, apiKeyId, 'the caller becomes the owner again');

    const moved = await app.api(second.key, 'PATCH', `/webhooks/${created.subscriptionId}`, { url: 'https://hooks.example.com/moved', description: null });
    assert.equal(moved.statusCode, 200, moved.body);
    const afterUrl = moved.json() as SubscriptionBody;
    assert.equal(afterUrl.url, 'https://hooks.example.com/moved');
    assert.equal('description' in afterUrl, false, 'null clears the description');
    assert.deepEqual(afterUrl.events, ['message.created']);
    assert.equal(afterUrl.active, false);
    assert.equal(afterUrl.ownerApiKeyId, second.apiKeyId);

    const read = await app.api(key, 'GET', `/webhooks/${created.subscriptionId}`);
    assert.deepEqual(read.json(), afterUrl);
  });

  test('PATCH {} is 400; PATCH needs the read scopes of the resulting events again', async () => {
    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/empty', events: ['message.created'] });
    const empty = await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, {});
    expectError(empty, 400, 'M2M_INVALID_REQUEST');

    const writeOnly = await addKey(app, tenantId, ['webhooks:write'], 'write-only');
    const denied = await app.api(writeOnly.key, 'PATCH', `/webhooks/${created.subscriptionId}`, { active: false });
    const error = expectError(denied, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.deepEqual(sorted(error.details.requiredScopes as string[]), sorted(['webhooks:write', 'conversations:read']));
    assert.deepEqual(error.details.missingScopes, ['conversations:read']);
    const read = await app.api(key, 'GET', `/webhooks/${created.subscriptionId}`);
    assert.equal((read.json() as SubscriptionBody).active, true, 'a denied PATCH changes nothing');
    assert.equal((read.json() as SubscriptionBody).ownerApiKeyId, apiKeyId);
  });

  test('DELETE → 204, then GET, PATCH, DELETE and deliveries → 404; the list no longer has it', async () => {
    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/delete', events: ['message.created'] });
    const removed = await app.api(key, 'DELETE', `/webhooks/${created.subscriptionId}`);
    assert.equal(removed.statusCode, 204, removed.body);
    assert.equal(removed.body, '');
    expectError(await app.api(key, 'GET', `/webhooks/${created.subscriptionId}`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { active: true }), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'DELETE', `/webhooks/${created.subscriptionId}`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'GET', `/webhooks/${created.subscriptionId}/deliveries`), 404, 'M2M_NOT_FOUND');
    expectError(await app.api(key, 'POST', `/webhooks/${created.subscriptionId}/rotate-secret`), 404, 'M2M_NOT_FOUND');
    const list = (await app.api(key, 'GET', '/webhooks')).json() as { subscriptions: SubscriptionBody[] };
    assert.equal(list.subscriptions.some((s) => s.subscriptionId === created.subscriptionId), false);
  });

  test("another tenant's subscription is 404 everywhere, with the same body as a missing one", async () => {
    const owner = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const key = owner.key;
    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/mine', events: ['message.created'] });
    const emitted = await emitEvent(app, owner.tenantId, 'message.created', { messageId: 'm-foreign' });
    assert.equal(emitted.deliveries, 1);
    const deliveries = (await app.api(key, 'GET', `/webhooks/${created.subscriptionId}/deliveries`)).json() as { deliveries: DeliveryBody[] };
    const delivery = deliveries.deliveries.find((d) => d.eventId === emitted.eventId);
    assert.ok(delivery);

    const other = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
    const id = created.subscriptionId;
    const probes: Array<[string, string, unknown?]> = [
      ['GET', `/webhooks/${id}`],
      ['PATCH', `/webhooks/${id}`, { active: false }],
      ['DELETE', `/webhooks/${id}`],
      ['POST', `/webhooks/${id}/rotate-secret`],
      ['GET', `/webhooks/${id}/deliveries`],
      ['GET', `/webhooks/${id}/deliveries/${delivery.deliveryId}`],
      ['GET', `/webhooks/${id}/deliveries/${delivery.deliveryId}/attempts`],
      ['POST', `/webhooks/${id}/deliveries/${delivery.deliveryId}/retry`],
    ];
    for (const [method, url, body] of probes) {
      const foreign = await app.api(other.key, method, url, body);
      const foreignError = expectError(foreign, 404, 'M2M_NOT_FOUND');
      const missing = await app.api(other.key, method, url.replace(id, 'whk_00000000000000000000000000'), body);
      const missingError = expectError(missing, 404, 'M2M_NOT_FOUND');
      assert.deepEqual(foreignError, missingError, `${method} ${url}`);
    }
    const list = (await app.api(other.key, 'GET', '/webhooks')).json() as { subscriptions: SubscriptionBody[] };
    assert.deepEqual(list.subscriptions, []);

    // Nothing changed on the owner's side.
    const read = await app.api(key, 'GET', `/webhooks/${id}`);
    assert.equal(read.statusCode, 200);
    const { secret: _secret, ...withoutSecret } = created;
    assert.deepEqual(read.json(), withoutSecret);
  });

  test('unknown event type → 400 M2M_INVALID_REQUEST on create and on PATCH', async () => {
    const response = await app.api(key, 'POST', '/webhooks', { url: 'https://hooks.example.com/x', events: ['message.created', 'message.exploded'] });
    const issues = issuesOf(response);
    assert.ok(issues.some((i) => i.path === 'body.events' && i.message.includes('message.exploded')), JSON.stringify(issues));

    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/x', events: ['message.created'] });
    const patch = await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { events: ['nope'] });
    assert.ok(issuesOf(patch).some((i) => i.path === 'body.events'));
  });

  test('unknown body or query properties → 400 naming them in details.issues', async () => {
    const create = await app.api(key, 'POST', '/webhooks', { url: 'https://hooks.example.com/x', events: ['message.created'], colour: 'blue' });
    assert.deepEqual(issuesOf(create), [{ path: 'body.colour', message: 'unknown property' }]);

    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/x', events: ['message.created'] });
    const patch = await app.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { active: true, secret: 'whsec_mine' });
    assert.deepEqual(issuesOf(patch), [{ path: 'body.secret', message: 'unknown property' }]);

    const query = await app.api(key, 'GET', `/webhooks/${created.subscriptionId}/deliveries?sort=asc`);
    assert.deepEqual(issuesOf(query), [{ path: 'query.sort', message: 'unknown property' }]);

    const missing = await app.api(key, 'POST', '/webhooks', { events: ['message.created'] });
    assert.ok(issuesOf(missing).some((i) => i.path === 'body.url'));
  });

  test('missing read scope of a selected event → 403 with exact requiredScopes and missingScopes', async () => {
    const partial = await addKey(app, tenantId, ['webhooks:write', 'conversations:read'], 'partial');
    const response = await app.api(partial.key, 'POST', '/webhooks', {
      url: 'https://hooks.example.com/x',
      events: ['message.created', 'crm.opportunity.created', 'message.delivery.updated'],
    });
    const error = expectError(response, 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.deepEqual(Object.keys(error.details).sort(), ['missingScopes', 'requiredScopes']);
    assert.deepEqual(sorted(error.details.requiredScopes as string[]), sorted(['webhooks:write', 'conversations:read', 'crm:sales:read', 'messages:read']));
    assert.deepEqual(sorted(error.details.missingScopes as string[]), sorted(['crm:sales:read', 'messages:read']));
    assert.match(error.message, /scope/);

    const list = (await app.api(partial.key, 'GET', '/webhooks')).json() as { subscriptions: SubscriptionBody[] };
    assert.equal(list.subscriptions.some((s) => s.ownerApiKeyId === partial.apiKeyId), false, 'nothing was created');

    // The write scope of an event's area also satisfies its read scope (conversations:write covers conversations:read).
    const writer = await addKey(app, tenantId, ['webhooks:write', 'conversations:write'], 'area-writer');
    await createSubscription(app, writer.key, { url: 'https://hooks.example.com/y', events: ['conversation.handoff.updated'] });
  });

  test('webhooks:read only → 403 on every write; webhooks:write implies read', async () => {
    const created = await createSubscription(app, key, { url: 'https://hooks.example.com/scopes', events: ['message.created'] });
    const reader = await addKey(app, tenantId, ['webhooks:read', 'conversations:read'], 'reader');
    const writes: Array<[string, string, unknown?]> = [
      ['POST', '/webhooks', { url: 'https://hooks.example.com/z', events: ['message.created'] }],
      ['PATCH', `/webhooks/${created.subscriptionId}`, { active: false }],
      ['DELETE', `/webhooks/${created.subscriptionId}`],
      ['POST', `/webhooks/${created.subscriptionId}/rotate-secret`],
    ];
    for (const [method, url, body] of writes) {
      const error = expectError(await app.api(reader.key, method, url, body), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
      assert.deepEqual(error.details, { requiredScopes: ['webhooks:write'], missingScopes: ['webhooks:write'] }, `${method} ${url}`);
    }
    assert.equal((await app.api(reader.key, 'GET', `/webhooks/${created.subscriptionId}`)).statusCode, 200);
    assert.equal((await app.api(reader.key, 'GET', '/webhooks')).statusCode, 200);

    const writer = await addKey(app, tenantId, ['webhooks:write'], 'writer');
    assert.equal((await app.api(writer.key, 'GET', '/webhooks')).statusCode, 200);
    assert.equal((await app.api(writer.key, 'GET', `/webhooks/${created.subscriptionId}`)).statusCode, 200);
    assert.equal((await app.api(writer.key, 'GET', `/webhooks/${created.subscriptionId}/deliveries`)).statusCode, 200);

    const none = await addKey(app, tenantId, ['conversations:read'], 'no-webhooks');
    const error = expectError(await app.api(none.key, 'GET', '/webhooks'), 403, 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.deepEqual(error.details, { requiredScopes: ['webhooks:read'], missingScopes: ['webhooks:read'] });
  });

  test('missing or unknown credentials → 401 with WWW-Authenticate', async () => {
    const missing = await app.api(undefined, 'GET', '/webhooks');
    expectError(missing, 401, 'M2M_AUTH_MISSING_CREDENTIALS');
    assert.match(String(missing.headers['www-authenticate']), /^Bearer/);
    const unknown = await app.api('m2m_live_not-a-real-key', 'GET', '/webhooks');
    expectError(unknown, 401, 'M2M_AUTH_INVALID_CREDENTIALS');
    assert.match(String(unknown.headers['www-authenticate']), /^Bearer/);
  });

  describe('delivery list paging', () => {
    let subscriptionId: string;
    let tenantId: string;
    let key: string;
    const emitted: string[] = [];

    before(async () => {
      ({ tenantId, key } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES));
      subscriptionId = (await createSubscription(app, key, { url: 'http://127.0.0.1:9/never-called', events: ['message.created'] })).subscriptionId;
      for (let i = 0; i < 7; i++) {
        tick();
        const event = await emitEvent(app, tenantId, 'message.created', { messageId: `m${i}`, conversationId: 'c1', direction: 'inbound', channel: 'whatsapp' });
        assert.equal(event.deliveries, 1);
        emitted.push(event.eventId);
      }
    });

    const page = async (query: string) => {
      const response = await app.api(key, 'GET', `/webhooks/${subscriptionId}/deliveries?${query}`);
      assert.equal(response.statusCode, 200, response.body);
      return response.json() as { deliveries: DeliveryBody[]; nextCursor?: string; hasMore: boolean };
    };

    test('limit 3: hasMore and nextCursor until the end; newest first, no duplicates, all seen', async () => {
      const seen: DeliveryBody[] = [];
      let cursor: string | undefined;
      const sizes: number[] = [];
      for (let guard = 0; guard < 10; guard++) {
        const body = await page(`limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        sizes.push(body.deliveries.length);
        seen.push(...body.deliveries);
        if (body.hasMore) {
          assert.equal(typeof body.nextCursor, 'string');
          assert.ok(body.nextCursor!.length <= 400);
          assert.deepEqual(sorted(Object.keys(body)), ['deliveries', 'hasMore', 'nextCursor']);
          cursor = body.nextCursor;
        } else {
          assert.deepEqual(sorted(Object.keys(body)), ['deliveries', 'hasMore'], 'no nextCursor on the last page');
          break;
        }
      }
      assert.deepEqual(sizes, [3, 3, 1]);
      const ids = seen.map((d) => d.eventId);
      assert.equal(new Set(seen.map((d) => d.deliveryId)).size, 7, 'no duplicates');
      assert.deepEqual(ids, [...emitted].reverse(), 'newest first, every event once');
      for (const delivery of seen) {
        assert.equal(delivery.subscriptionId, subscriptionId);
        assert.equal(delivery.status, 'pending');
        assert.equal(delivery.attempts, 0);
        assert.equal(delivery.eventType, 'message.created');
        assert.equal(typeof delivery.nextAttemptAt, 'string');
      }
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1].createdAt > seen[i].createdAt);
    });

    test('rows created within one millisecond page exactly (the cursor keeps microseconds)', async () => {
      const { tenantId: otherTenant, key: otherKey } = await app.tenantWithKey(FULL_WEBHOOK_SCOPES);
      const other = (await createSubscription(app, otherKey, { url: 'http://127.0.0.1:9/never-called', events: ['message.created'] })).subscriptionId;
      for (let i = 0; i < 4; i++) await emitEvent(app, otherTenant, 'message.created', { messageId: `u${i}`, conversationId: 'c1', direction: 'inbound', channel: 'whatsapp' });
      // Timestamps written by SQL carry microseconds: .000100 … .000400 within one millisecond, ids in the opposite order.
      await app.runtime.services.db.query(
        `UPDATE webhook_deliveries d SET created_at = '2026-01-01T00:00:00Z'::timestamptz + (n.rank * interval '100 microseconds')
         FROM (SELECT id, row_number() OVER (ORDER BY id DESC) AS rank FROM webhook_deliveries WHERE subscription_id = $1) n
         WHERE d.id = n.id`,
        [other],
      );
      const expected = (await app.runtime.services.db.query<{ id: string }>(
        'SELECT id FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY created_at DESC, id DESC',
        [other],
      )).map((row) => row.id);
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let guard = 0; guard < 6; guard++) {
        const response = await app.api(otherKey, 'GET', `/webhooks/${other}/deliveries?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        assert.equal(response.statusCode, 200, response.body);
        const body = response.json() as { deliveries: DeliveryBody[]; nextCursor?: string; hasMore: boolean };
        seen.push(...body.deliveries.map((d) => d.deliveryId));
        for (const d of body.deliveries) assert.equal(d.createdAt, '2026-01-01T00:00:00.000Z');
        if (!body.hasMore) break;
        cursor = body.nextCursor;
      }
      assert.deepEqual(seen, expected, 'every delivery once, newest first');
    });

    test('the status filter pages too, and a cursor keeps its filter', async () => {
      const first = await page('limit=4&status=pending');
      assert.equal(first.deliveries.length, 4);
      assert.equal(first.hasMore, true);
      const second = await page(`limit=4&status=pending&cursor=${encodeURIComponent(first.nextCursor!)}`);
      assert.equal(second.hasMore, false);
      assert.deepEqual([...first.deliveries, ...second.deliveries].map((d) => d.eventId), [...emitted].reverse());
      assert.deepEqual((await page('status=delivered')).deliveries, []);
      assert.equal((await page('limit=200')).deliveries.length, 7);
    });

    test('tampered cursor, another filter, another subscription → 400 M2M_INVALID_CURSOR', async () => {
      const { nextCursor } = await page('limit=3');
      assert.ok(nextCursor);
      const [payload, signature] = nextCursor.split('.');
      const flipped = `${payload}.${signature.slice(0, -1)}${signature.endsWith('A') ? 'B' : 'A'}`;
      const forgedPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), p: { createdAt: '2099-01-01T00:00:00.000Z', id: 'zzz' } })).toString('base64url');
      const url = (cursor: string, extra = '') => `/webhooks/${subscriptionId}/deliveries?limit=3&cursor=${encodeURIComponent(cursor)}${extra}`;
      for (const cursor of [flipped, `${forgedPayload}.${signature}`, 'not-a-cursor', `${nextCursor}.x`]) {
        expectError(await app.api(key, 'GET', url(cursor)), 400, 'M2M_INVALID_CURSOR');
      }
      expectError(await app.api(key, 'GET', url(nextCursor, '&status=pending')), 400, 'M2M_INVALID_CURSOR');

      const other = await createSubscription(app, key, { url: 'http://127.0.0.1:9/other', events: ['message.created'] });
      expectError(
        await app.api(key, 'GET', `/webhooks/${other.subscriptionId}/deliveries?limit=3&cursor=${encodeURIComponent(nextCursor)}`),
        400,
        'M2M_INVALID_CURSOR',
      );
      // The genuine cursor still works.
      assert.equal((await page(`limit=3&cursor=${encodeURIComponent(nextCursor)}`)).deliveries.length, 3);
    });

    test('limit=0, limit=201, limit=abc and status=bogus → 400 M2M_INVALID_REQUEST', async () => {
      for (const query of ['limit=0', 'limit=201', 'limit=abc', 'status=bogus']) {
        const response = await app.api(key, 'GET', `/webhooks/${subscriptionId}/deliveries?${query}`);
        const issues = issuesOf(response);
        assert.ok(issues.some((i) => i.path === `query.${query.split('=')[0]}`), `${query}: ${JSON.stringify(issues)}`);
      }
    });
  });
});

describe('webhook URL rules without the escape hatch', () => {
  let strict: TestApp;
  let key: string;

  before(async () => {
    strict = await startTestApp();
    ({ key } = await strict.tenantWithKey(FULL_WEBHOOK_SCOPES));
  });
  after(() => strict.close());

  test('non-https, other ports, credentials, local and private hosts, IPv6 literals → 400 on body.url', async () => {
    for (const url of [
      'http://hooks.example.com/path',
      'https://x.example:8443/path',
      'https://user:pw@x.example/path',
      'https://localhost/path',
      'https://10.0.0.1/path',
      'https://[::1]/path',
      'https://127.0.0.1/path',
      'https://169.254.169.254/latest',
      'https://printer.local/path',
      'ftp://hooks.example.com/path',
      'not a url',
    ]) {
      const response = await strict.api(key, 'POST', '/webhooks', { url, events: ['message.created'] });
      const issues = issuesOf(response);
      assert.ok(issues.some((i) => i.path === 'body.url'), `${url}: ${JSON.stringify(issues)}`);
    }
    const list = (await strict.api(key, 'GET', '/webhooks')).json() as { subscriptions: SubscriptionBody[] };
    assert.deepEqual(list.subscriptions, [], 'nothing was created');
  });

  test('a public https URL on 443 is accepted; PATCH applies the same rules', async () => {
    const created = await createSubscription(strict, key, { url: 'https://hooks.example.com/path', events: ['message.created'] });
    assert.equal(created.url, 'https://hooks.example.com/path');
    const explicitPort = await createSubscription(strict, key, { url: 'https://hooks.example.com:443/other', events: ['message.created'] });
    assert.equal(explicitPort.url, 'https://hooks.example.com/other');

    const patch = await strict.api(key, 'PATCH', `/webhooks/${created.subscriptionId}`, { url: 'http://127.0.0.1:8080/hook' });
    assert.ok(issuesOf(patch).some((i) => i.path === 'body.url'));
    const read = (await strict.api(key, 'GET', `/webhooks/${created.subscriptionId}`)).json() as SubscriptionBody;
    assert.equal(read.url, 'https://hooks.example.com/path');
  });
});
