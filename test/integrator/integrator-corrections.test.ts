import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.js';

// The contract corrections of decisions 7.4: what the document says (integer pageSize, no `mine` offered,
// x-event-scopes, 415 documented) and three answers (owner=mine still a clear 400, a follow-up due after it
// expires is 400, an admin POST with the JSON content type and no body is {}).

let app: TestApp;
let doc: { paths: Record<string, Record<string, { parameters?: Array<{ name: string; schema: Record<string, unknown> }>; responses: Record<string, unknown>; [key: string]: unknown }>> };
before(async () => {
  app = await startTestApp();
  doc = (await app.api(undefined, 'GET', '/openapi.json')).json();
});
after(() => app.close());

function responseSchema(path: string): Record<string, Record<string, unknown>> {
  const response = doc.paths[path].get.responses['200'] as { content: { 'application/json': { schema: { properties: Record<string, Record<string, unknown>> } } } };
  return response.content['application/json'].schema.properties;
}

test('pageSize is an integer fixed at 20 in the document', () => {
  for (const path of ['/reservations', '/reservations/lifecycle-receipts', '/reservations/{integrationId}/{providerReservationId}/attempts']) {
    const pageSize = responseSchema(path).pageSize;
    assert.equal(pageSize.type, 'integer', path);
    assert.deepEqual(pageSize.const ?? pageSize.enum, pageSize.const === undefined ? [20] : 20, path);
  }
});

test('the owner filter does not offer mine, and owner=mine is still a 400 saying why', async () => {
  const owner = doc.paths['/conversations'].get.parameters?.find((p) => p.name === 'owner');
  assert.ok(owner);
  assert.doesNotMatch(String(owner.schema.pattern), /mine/);
  assert.doesNotMatch(String(owner.schema.description), /mine/);
  const { key } = await app.tenantWithKey(['conversations:read']);
  const res = await app.api(key, 'GET', '/conversations?owner=mine');
  assert.equal(res.statusCode, 400);
  assert.deepEqual(res.json().error.details.issues, [{ path: 'query.owner', message: 'mine is not supported for API keys; pass all or an operator id' }]);
  const bad = await app.api(key, 'GET', '/conversations?owner=abc');
  assert.equal(bad.statusCode, 400);
  assert.match(bad.json().error.details.issues[0].message, /pattern/);
});

test('POST and PATCH /webhooks name the read scope of each event type; bodies document 415', async () => {
  for (const [path, method] of [['/webhooks', 'post'], ['/webhooks/{subscriptionId}', 'patch']] as const) {
    const scopes = doc.paths[path][method]['x-event-scopes'] as Record<string, string>;
    assert.equal(scopes['message.created'], 'conversations:read', `${method} ${path}`);
    assert.equal(scopes['crm.opportunity.updated'], 'crm:sales:read');
    assert.ok(doc.paths[path][method].responses['415'], `${method} ${path}: 415 documented`);
  }
  assert.equal(doc.paths['/webhooks'].get.responses['415'], undefined, 'no body, no 415');
  const { key } = await app.tenantWithKey(['contacts:write']);
  const res = await app.runtime.app.inject({ method: 'POST', url: '/m2m/v1/contacts', headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, payload: 'phone=+525512345678' });
  assert.equal(res.statusCode, 415);
  assert.equal(res.json().error.code, 'M2M_UNSUPPORTED_MEDIA_TYPE');
});

test("a follow-up's dueAt after its expiresAt is 400", async () => {
  const { tenantId, key } = await app.tenantWithKey(['crm:followups:write']);
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WA' });
  const inbound = await app.admin<{ conversationId: string }>('POST', `/tenants/${tenantId}/inbound-messages`, { channelId, contact: { phone: '+525570000001' }, text: 'Hola' });
  const { leadId } = await app.admin<{ leadId: string }>('POST', `/tenants/${tenantId}/leads`, { name: 'Ana', conversationId: inbound.conversationId });
  const created = await app.api(key, 'POST', '/crm/follow-ups', { leadId, conversationId: inbound.conversationId });
  assert.equal(created.statusCode, 201, created.body);
  const { followUpId, expiresAt } = created.json().followUp as { followUpId: string; expiresAt: string };
  const late = new Date(Date.parse(expiresAt) + 60_000).toISOString();
  const res = await app.api(key, 'PATCH', `/crm/follow-ups/${followUpId}`, { dueAt: late });
  assert.equal(res.statusCode, 400, res.body);
  assert.equal(res.json().error.details.issues[0].path, 'body.dueAt');
  assert.equal((await app.api(key, 'PATCH', `/crm/follow-ups/${followUpId}`, { dueAt: expiresAt })).statusCode, 200, 'due exactly when it expires is allowed');
});

test('an admin POST with the JSON content type and an empty body is {}; the public API still refuses it', async () => {
  const { tenantId, apiKeyId } = await app.tenantWithKey(['conversations:triage:write']);
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const revoke = await app.runtime.app.inject({ method: 'POST', url: `/admin/v1/tenants/${tenantId}/api-keys/${apiKeyId}/revoke`, headers, payload: '' });
  assert.equal(revoke.statusCode, 200, revoke.body);
  const missing = await app.runtime.app.inject({ method: 'POST', url: `/admin/v1/tenants/${tenantId}/properties`, headers, payload: '' });
  assert.equal(missing.statusCode, 400, missing.body);
  assert.deepEqual(missing.json().error.details.issues.map((i: { path: string }) => i.path), ['body.name']);
});
