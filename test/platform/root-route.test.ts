import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { after, before, test } from 'node:test';
import { rootRoute } from '../../src/http/root-route.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

let app: TestApp;

before(async () => {
  app = await startTestApp();
});

after(async () => {
  await app?.close();
});

interface RootBody {
  docs: string;
  openapi: string;
  health: string;
  readiness: string;
  api: string;
}

test('GET / names the reference, the OpenAPI document and the health routes, without a key', async () => {
  const bare = Fastify();
  await bare.register(rootRoute('/m2m/v1'));
  try {
    const response = await bare.inject({ method: 'GET', url: '/' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^application\/json/);
    const body = response.json() as RootBody;
    assert.deepEqual([body.api, body.docs, body.openapi, body.health, body.readiness], ['/m2m/v1', '/m2m/v1/docs', '/m2m/v1/openapi.json', '/healthz', '/readyz']);
    assert.equal((await bare.inject({ method: 'HEAD', url: '/' })).statusCode, 200);

    // Every path it names answers on the real server, without a key.
    for (const path of [body.docs, body.openapi, body.health, body.readiness]) {
      const linked = await app.runtime.app.inject({ method: 'GET', url: path });
      assert.equal(linked.statusCode, 200, `${path} → ${linked.statusCode}`);
    }
  } finally {
    await bare.close();
  }
});

test('on the real server GET / answers with X-Request-Id like every route, and other methods get the 404 envelope', async (t) => {
  const server = app.runtime.app;
  if (!server.hasRoute({ method: 'GET', url: '/' })) {
    t.skip('src/app.ts does not register rootRoute yet');
    return;
  }
  const response = await server.inject({ method: 'GET', url: '/', headers: { 'x-request-id': 'req-root-1' } });
  assert.equal(response.statusCode, 200);
  assert.equal(response.headers['x-request-id'], 'req-root-1');
  assert.equal((response.json() as RootBody).docs, '/m2m/v1/docs');
  const posted = await server.inject({ method: 'POST', url: '/', payload: {} });
  assert.equal(posted.statusCode, 404);
  assert.ok(posted.headers['x-request-id']);
  assert.deepEqual(Object.keys(posted.json() as object), ['error']);
  assert.equal((posted.json() as { error: { code: string } }).error.code, 'M2M_NOT_FOUND');
});
