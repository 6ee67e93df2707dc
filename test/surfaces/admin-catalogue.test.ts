import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { Type } from 'typebox';
import { Validator } from '@seriousme/openapi-schema-validator';
import { ErrorBody } from '../../src/http/schemas.js';
import { ADMIN_OPERATIONS, CATALOGUE, OPERATIONS } from '../../src/operations/catalogue.js';
import { buildTools } from '../../src/mcp/tools.js';
import { OPERATIONS as SDK_OPERATIONS } from '../../packages/client/src/index.js';
import { defineOperation } from '../../src/operations/define.js';
import { registerOperations } from '../../src/operations/rest.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// The admin catalogue: its own document behind the admin token, nothing of it in the public document, and
// answers checked against their declared schemas (so the admin calls of every other test check them too).

let app: TestApp;

before(async () => {
  app = await startTestApp();
});
after(() => app.close());

test('one catalogue: admin operations are entries of it, and none is an MCP tool or an SDK method', () => {
  assert.equal(CATALOGUE.length, OPERATIONS.length + ADMIN_OPERATIONS.length);
  for (const op of [...OPERATIONS, ...ADMIN_OPERATIONS]) assert.ok(CATALOGUE.includes(op), op.operationId);
  assert.ok(ADMIN_OPERATIONS.every((op) => op.surface === 'admin'));
  const tools = [...buildTools().values()];
  assert.equal(tools.length, OPERATIONS.length);
  assert.ok(tools.every((tool) => tool.operation.surface === 'public'));
  const publicIds = new Set(OPERATIONS.map((op) => op.operationId));
  for (const op of ADMIN_OPERATIONS.filter((admin) => !publicIds.has(admin.operationId))) {
    assert.equal(Object.hasOwn(SDK_OPERATIONS, op.operationId), false, `${op.operationId} has no SDK method`);
  }
});

test('the public document has no admin route', async () => {
  const doc = (await app.api(undefined, 'GET', '/openapi.json')).json();
  const publicRoutes = new Set(OPERATIONS.map((op) => `${op.method} ${op.path}`));
  for (const op of ADMIN_OPERATIONS) {
    assert.equal(publicRoutes.has(`${op.method} ${op.path}`), false, op.operationId);
    assert.equal(doc.paths[op.path]?.[op.method.toLowerCase()], undefined, `${op.operationId} is not public`);
  }
  assert.equal(Object.keys(doc.paths).filter((path) => path.startsWith('/tenants')).length, 0);
  assert.equal(Object.keys(doc.paths).filter((path) => path.includes('stream')).length, 0);
});

test('the admin document is served behind the admin token and declares every admin operation', async () => {
  assert.equal((await app.runtime.app.inject({ method: 'GET', url: '/admin/v1/openapi.json' })).statusCode, 401);
  const res = await app.adminRaw('GET', '/openapi.json');
  assert.equal(res.statusCode, 200);
  const doc = res.json();
  const result = await new Validator().validate(doc);
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  const count = Object.values(doc.paths as Record<string, Record<string, unknown>>).reduce((n, item) => n + Object.keys(item).length, 0);
  assert.equal(count, ADMIN_OPERATIONS.length);
  for (const op of ADMIN_OPERATIONS) {
    const entry = doc.paths[op.path]?.[op.method.toLowerCase()];
    assert.ok(entry, `${op.method} ${op.path}`);
    assert.equal(entry.operationId, op.operationId);
    for (const status of [...op.statuses, 400, 401, 403, 429, ...op.errors]) {
      assert.ok(entry.responses[String(status)]?.content['application/json'].schema, `${op.operationId}: ${status} has a schema`);
    }
    assert.doesNotMatch(JSON.stringify(entry), /\$ref/, `${op.operationId}: self-contained`);
  }
});

test("tenant routes check the path's tenant before anything else runs", async () => {
  const res = await app.adminRaw('POST', '/tenants/ten_missing/webhook-events', { type: 'message.created', data: {} });
  assert.equal(res.statusCode, 404);
  assert.equal(res.json().error.code, 'M2M_NOT_FOUND');
  assert.equal(res.json().error.message, 'tenant not found');
});

test('an answer that drifts from its declared schema is a 500, not a silently dropped field', async () => {
  const drifting = defineOperation({
    surface: 'admin',
    operationId: 'drift',
    method: 'GET',
    path: '/drift',
    summary: 'Answers a field its schema does not list',
    status: 200,
    response: Type.Object({ id: Type.String() }, { additionalProperties: false }),
    handler: async () => ({ id: 'x', extra: true }),
  });
  const fastify = Fastify();
  fastify.addSchema(ErrorBody);
  registerOperations(fastify, app.runtime.services, [drifting]);
  const res = await fastify.inject({ method: 'GET', url: '/drift' });
  assert.equal(res.statusCode, 500);
  await fastify.close();
});
