import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startTestApp, type TestApp } from '../helpers/app.js';

let app: TestApp;

before(async () => {
  app = await startTestApp();
  // A route that fails unexpectedly, registered before the app is ready, to see what a 500 looks like.
  app.runtime.app.get('/m2m/v1-test/boom', { schema: { hide: true } }, async () => {
    throw new Error('secret database detail at /srv/app.ts:42');
  });
});
after(() => app.close());

test('health and readiness', async () => {
  const health = await app.runtime.app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(health.statusCode, 200);
  assert.deepEqual(health.json(), { status: 'ok' });
  const ready = await app.runtime.app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(ready.statusCode, 200);
});

test('missing or malformed Authorization is 401 M2M_AUTH_MISSING_CREDENTIALS with WWW-Authenticate', async () => {
  for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer' }, { authorization: 'Bearer a b' }]) {
    const res = await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1/webhooks', headers });
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().error.code, 'M2M_AUTH_MISSING_CREDENTIALS');
    assert.match(String(res.headers['www-authenticate']), /^Bearer/);
  }
});

test('unknown, revoked and expired keys are 401 M2M_AUTH_INVALID_CREDENTIALS', async () => {
  const unknown = await app.api('m2m_live_' + 'x'.repeat(43), 'GET', '/webhooks');
  assert.equal(unknown.statusCode, 401);
  assert.equal(unknown.json().error.code, 'M2M_AUTH_INVALID_CREDENTIALS');
  assert.match(String(unknown.headers['www-authenticate']), /^Bearer/);

  const { tenantId, key, apiKeyId } = await app.tenantWithKey(['webhooks:read']);
  assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 200);
  await app.admin('POST', `/tenants/${tenantId}/api-keys/${apiKeyId}/revoke`);
  const revoked = await app.api(key, 'GET', '/webhooks');
  assert.equal(revoked.statusCode, 401);
  assert.equal(revoked.json().error.code, 'M2M_AUTH_INVALID_CREDENTIALS');

  const soon = new Date(Date.now() + 1500).toISOString();
  const expiring = await app.admin<{ key: string }>('POST', `/tenants/${tenantId}/api-keys`, { name: 'short', scopes: ['webhooks:read'], expiresAt: soon });
  assert.equal((await app.api(expiring.key, 'GET', '/webhooks')).statusCode, 200);
  await new Promise((resolve) => setTimeout(resolve, 1700));
  const expired = await app.api(expiring.key, 'GET', '/webhooks');
  assert.equal(expired.statusCode, 401);
  assert.equal(expired.json().error.code, 'M2M_AUTH_INVALID_CREDENTIALS');
});

test('a missing scope is 403 with requiredScopes and missingScopes; write implies read', async () => {
  const { key } = await app.tenantWithKey(['messages:read']);
  const res = await app.api(key, 'GET', '/webhooks');
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), {
    error: {
      code: 'M2M_AUTH_INSUFFICIENT_SCOPE',
      message: res.json().error.message,
      details: { requiredScopes: ['webhooks:read'], missingScopes: ['webhooks:read'] },
    },
  });
  assert.match(res.json().error.message, /lacks the required scope/);

  const writer = await app.tenantWithKey(['webhooks:write']);
  assert.equal((await app.api(writer.key, 'GET', '/webhooks')).statusCode, 200);
});

test('scope changes take effect on the next request', async () => {
  const { tenantId, key, apiKeyId } = await app.tenantWithKey(['webhooks:read']);
  assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 200);
  await app.admin('PATCH', `/tenants/${tenantId}/api-keys/${apiKeyId}`, { scopes: ['messages:read'] });
  assert.equal((await app.api(key, 'GET', '/webhooks')).statusCode, 403);
});

test('every response carries X-Request-Id; a safe incoming id is kept', async () => {
  const ok = await app.runtime.app.inject({ method: 'GET', url: '/healthz' });
  assert.match(String(ok.headers['x-request-id']), /^req_/);
  const notFound = await app.runtime.app.inject({ method: 'GET', url: '/nope' });
  assert.ok(notFound.headers['x-request-id']);
  const given = await app.runtime.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'client-id-123' } });
  assert.equal(given.headers['x-request-id'], 'client-id-123');
  const unsafe = await app.runtime.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'bad id\u0001' } });
  assert.notEqual(unsafe.headers['x-request-id'], 'bad id\u0001');
});

test('unknown routes are 404 with the envelope', async () => {
  const res = await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1/does-not-exist' });
  assert.equal(res.statusCode, 404);
  assert.equal(res.json().error.code, 'M2M_NOT_FOUND');
});

test('malformed JSON, wrong content type, unknown properties, wrong types and too large bodies are 4xx envelopes', async () => {
  const { key } = await app.tenantWithKey(['webhooks:write', 'messages:read']);
  const post = (payload: string, contentType = 'application/json') =>
    app.runtime.app.inject({
      method: 'POST',
      url: '/m2m/v1/webhooks',
      headers: { authorization: `Bearer ${key}`, 'content-type': contentType },
      payload,
    });

  const badJson = await post('{"url": ');
  assert.equal(badJson.statusCode, 400);
  assert.equal(badJson.json().error.code, 'M2M_INVALID_REQUEST');

  const text = await post('hello', 'text/plain');
  assert.equal(text.statusCode, 415);
  assert.equal(text.json().error.code, 'M2M_UNSUPPORTED_MEDIA_TYPE');

  const extra = await post(JSON.stringify({ url: 'https://hooks.example.com', events: ['message.delivery.updated'], colour: 'red' }));
  assert.equal(extra.statusCode, 400);
  assert.deepEqual(extra.json().error.details.issues, [{ path: 'body.colour', message: 'unknown property' }]);

  const wrongType = await post(JSON.stringify({ url: 42, events: 'message.created' }));
  assert.equal(wrongType.statusCode, 400);
  const paths = wrongType.json().error.details.issues.map((i: { path: string }) => i.path).sort();
  assert.deepEqual(paths, ['body.events', 'body.url']);

  const missing = await post(JSON.stringify({ events: ['message.delivery.updated'] }));
  assert.equal(missing.statusCode, 400);
  assert.deepEqual(missing.json().error.details.issues, [{ path: 'body.url', message: 'is required' }]);

  const tooLong = await post(JSON.stringify({ url: 'https://hooks.example.com/' + 'a'.repeat(2100), events: ['message.delivery.updated'] }));
  assert.equal(tooLong.statusCode, 400);

  const huge = await post(JSON.stringify({ url: 'https://hooks.example.com', events: ['message.delivery.updated'], description: 'x'.repeat(1_100_000) }));
  assert.equal(huge.statusCode, 413);
  assert.equal(huge.json().error.code, 'M2M_PAYLOAD_TOO_LARGE');
});

test('unknown query parameters are rejected with 400 naming them', async () => {
  const { key } = await app.tenantWithKey(['webhooks:read']);
  const res = await app.api(key, 'GET', '/webhooks/whk_missing/deliveries?colour=red');
  assert.equal(res.statusCode, 400);
  assert.deepEqual(res.json().error.details.issues, [{ path: 'query.colour', message: 'unknown property' }]);
});

test('an unexpected failure is 500 M2M_INTERNAL_ERROR with the request id and no internals', async () => {
  const res = await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1-test/boom' });
  assert.equal(res.statusCode, 500);
  const body = res.json();
  assert.equal(body.error.code, 'M2M_INTERNAL_ERROR');
  assert.equal(body.error.details.requestId, res.headers['x-request-id']);
  assert.doesNotMatch(res.body, /secret database detail|srv\/app\.ts|at .*\(/);
});

test('OpenAPI 3.1 document is generated from the schemas and validates', async () => {
  const res = await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1/openapi.json' });
  assert.equal(res.statusCode, 200);
  const doc = res.json();
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.version, '1.0.0');
  assert.ok(doc.paths['/webhooks'].post, 'POST /webhooks documented');
  assert.ok(doc.paths['/webhooks/{subscriptionId}/deliveries/{deliveryId}/retry'].post);
  assert.ok(!Object.keys(doc.paths).some((p) => p.startsWith('/admin')), 'admin routes are not in the public document');
  const validator = new Validator();
  const result = await validator.validate(doc);
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
});
