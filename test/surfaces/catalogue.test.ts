import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { M2MClient, OPERATIONS as SDK_OPERATIONS } from '../../packages/client/src/index.js';
import { GENERATED_PATH, generate } from '../../scripts/sdk/generate.js';
import { ALL_SCOPES } from '../../src/auth/scopes.js';
import { OPERATIONS, toolName } from '../../src/operations/catalogue.js';
import type { Operation } from '../../src/operations/define.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// Walks the operation catalogue: every operation must be a REST route, an OpenAPI operation, an MCP tool and
// an SDK method, must refuse a key without its scopes with the exact scope lists, and must answer another
// tenant's ids with 404. Declaring an operation is enough to be covered here.

let app: TestApp;
let mcpUrl: string;
/** Ids of tenant A's records, by path-parameter name. */
const ids: Record<string, string> = {};
let otherKey: string;
let ownKey: string;

function fillPath(path: string, values: Record<string, string>): string {
  return path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(values[name] ?? 'unknown-id'));
}

before(async () => {
  app = await startTestApp({ env: { MCP_ENABLED: 'true', UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  mcpUrl = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}/m2m/v1/mcp`;

  const a = await app.tenantWithKey([...ALL_SCOPES]);
  ownKey = a.key;
  otherKey = (await app.tenantWithKey([...ALL_SCOPES])).key;
  const ok = async (method: string, url: string, body?: unknown, headers?: Record<string, string>) => {
    const res = await app.api(a.key, method, url, body, headers);
    assert.ok(res.statusCode < 300, `${method} ${url} → ${res.statusCode} ${res.body}`);
    return res.json();
  };

  ids.subscriptionId = (await ok('POST', '/webhooks', { url: 'https://127.0.0.1:9/hook', events: ['message.created'] })).subscriptionId;
  ids.eventId = (await app.admin<{ eventId: string }>('POST', `/tenants/${a.tenantId}/webhook-events`, { type: 'message.created', data: { messageId: 'msg_x' } })).eventId;
  ids.deliveryId = (await ok('GET', `/webhooks/${ids.subscriptionId}/deliveries`)).deliveries[0].deliveryId;

  const webchat = await app.admin<{ channelId: string }>('POST', `/tenants/${a.tenantId}/channels`, { kind: 'webchat', name: 'Web' });
  const firstInbound = await app.admin<{ conversationId: string; messageId: string }>('POST', `/tenants/${a.tenantId}/inbound-messages`, { channelId: webchat.channelId, contact: { name: 'Ana', handle: 'ana' }, text: 'Hola' });
  ids.conversationId = firstInbound.conversationId;
  ids.messageId = firstInbound.messageId;
  const lead = await app.admin<{ leadId: string }>('POST', `/tenants/${a.tenantId}/leads`, { name: 'Ana', conversationId: ids.conversationId });
  ids.leadId = lead.leadId;
  ids.followUpId = (await ok('POST', '/crm/follow-ups', { leadId: lead.leadId, conversationId: ids.conversationId })).followUp.followUpId;
  ids.folderId = (await ok('POST', '/knowledge/asset-folders', { title: 'Photos' })).folder.folderId;
  ids.sourceId = (await app.admin<{ sourceId: string }>('POST', `/tenants/${a.tenantId}/knowledge/assets`, { title: 'Room', filename: 'room.txt', contentType: 'text/plain', contentBase64: Buffer.from('a room').toString('base64') })).sourceId;
  const crawl = (await ok('POST', '/knowledge/url/crawl', { rootUrl: 'http://127.0.0.1:9/', crawlDepth: 1, maxPages: 1 })).job;
  ids.jobId = crawl.jobId;
  ids.websiteId = crawl.websiteId;
  ids.integrationId = (await app.admin<{ integrationId: string }>('POST', `/tenants/${a.tenantId}/integrations`, { provider: 'pms', name: 'PMS' })).integrationId;

  const whatsapp = await app.admin<{ channelId: string }>('POST', `/tenants/${a.tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp' });
  ids.channelId = whatsapp.channelId;
  await app.admin('PUT', `/tenants/${a.tenantId}/channels/${whatsapp.channelId}/templates/conversation_start`, { category: 'UTILITY', locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
  await app.admin('POST', `/tenants/${a.tenantId}/contacts`, { phone: '+525520000001', consent: true });
  ids.contactId = (await ok('POST', '/contacts', { phone: '+525520000002' })).contact.contactId;
  ids.opportunityId = (await app.admin<{ opportunityId: string }>('POST', `/tenants/${a.tenantId}/opportunities`, { leadId: lead.leadId, stage: 'quote', status: 'open' })).opportunityId;
  ids.providerReservationId = 'RES-1';
  await app.admin('PUT', `/tenants/${a.tenantId}/integrations/${ids.integrationId}/reservations/RES-1`, {
    status: 'confirmed',
    checkInDate: '2030-01-10',
    checkOutDate: '2030-01-12',
    bookedAt: '2029-12-01T10:00:00.000Z',
    guestFullName: 'Ana',
  });
  ids.requestEventId = (await ok('POST', '/conversations/start', { channelId: whatsapp.channelId, recipientPhone: '+525520000001', locale: 'en_US', messageText: 'Hello' }, { 'idempotency-key': 'fixture' })).requestEventId;
});
after(() => app.close());

test('the catalogue declares every operation once, with examples', () => {
  assert.ok(OPERATIONS.length >= 42, `${OPERATIONS.length} operations`);
  assert.equal(new Set(OPERATIONS.map((op) => `${op.method} ${op.path}`)).size, OPERATIONS.length, 'one declaration per method and path');
  assert.equal(new Set(OPERATIONS.map((op) => op.sdk)).size, OPERATIONS.length, 'one SDK method per operation');
  for (const op of OPERATIONS) {
    if (op.body) assert.ok(op.examples.request !== undefined, `${op.operationId}: request example`);
    if (op.status !== 204) assert.ok(op.examples.response !== undefined, `${op.operationId}: response example`);
    assert.ok(op.description.length >= 40, `${op.operationId}: a description a model can choose by`);
  }
});

test('OpenAPI lists every operation with its operationId, scopes and examples', async () => {
  const doc = (await app.api(undefined, 'GET', '/openapi.json')).json();
  const count = Object.values(doc.paths as Record<string, Record<string, unknown>>).reduce((n, item) => n + Object.keys(item).length, 0);
  assert.equal(count, OPERATIONS.length, 'nothing undeclared is documented');
  for (const op of OPERATIONS) {
    const entry = doc.paths[op.path]?.[op.method.toLowerCase()];
    assert.ok(entry, `${op.method} ${op.path} documented`);
    assert.equal(entry.operationId, op.operationId);
    assert.deepEqual(entry['x-scopes'], op.scopes);
    assert.ok(entry.responses[String(op.status)], `${op.operationId}: success response documented`);
    for (const status of ['400', '401', '403', '429', ...op.errors.map(String)]) assert.ok(entry.responses[status], `${op.operationId}: ${status} documented`);
    const text = JSON.stringify(entry);
    if (op.body || op.status !== 204) assert.match(text, /"examples?"/, `${op.operationId}: an example in the document`);
  }
});

test('a key without the scopes gets 403 naming exactly the required and missing scopes', async () => {
  const { key } = await app.tenantWithKey(['crm:sales:read']);
  // Operations that need crm:sales:read (the sales reads, or any one of their scopes: the event feed) are probed
  // with a key holding none of theirs.
  const other = await app.tenantWithKey(['crm:automation:read']);
  for (const op of OPERATIONS) {
    const probe = op.scopes.some((scope) => scope === 'crm:sales:read') ? other.key : key;
    const res = await app.api(probe, op.method, fillPath(op.path, {}), op.body ? {} : undefined);
    assert.equal(res.statusCode, 403, `${op.operationId}: ${res.body}`);
    assert.ok(res.headers['x-request-id']);
    assert.deepEqual(res.json().error.details, { requiredScopes: op.scopes, missingScopes: op.scopes }, op.operationId);
  }
});

function bodyFor(op: Operation, values: Record<string, string>): unknown {
  if (!op.body) return undefined;
  const example = { ...(op.examples.request as Record<string, unknown> | undefined) };
  for (const name of Object.keys(example)) if (values[name]) example[name] = values[name];
  return example;
}

test("another tenant's ids answer 404, as missing ones do", async () => {
  let checked = 0;
  for (const op of OPERATIONS) {
    const params = Object.keys(op.params.properties);
    if (params.length === 0) continue;
    for (const name of params) assert.ok(ids[name], `${op.operationId}: a fixture for ${name}`);
    const headers: Record<string, string> = op.idempotency ? { 'idempotency-key': `foreign-${op.operationId}` } : {};
    const foreign = await app.api(otherKey, op.method, fillPath(op.path, ids), bodyFor(op, ids), headers);
    assert.equal(foreign.statusCode, 404, `${op.operationId} with another tenant's ids: ${foreign.body}`);
    assert.equal(foreign.json().error.code, 'M2M_NOT_FOUND');
    checked++;
  }
  assert.ok(checked >= 25, `${checked} operations with ids`);
  // The owner still reads its record: the 404 above was isolation, not a broken fixture.
  assert.equal((await app.api(ownKey, 'GET', `/webhooks/${ids.subscriptionId}`)).statusCode, 200);
});

test('MCP offers one tool per operation, with the same input, output and truthful annotations', async () => {
  const client = new Client({ name: 'coverage', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${ownKey}` } } }));
  const { tools } = await client.listTools();
  assert.equal(tools.length, OPERATIONS.length);
  for (const op of OPERATIONS) {
    const tool = tools.find((t) => t.name === toolName(op.operationId));
    assert.ok(tool, `${op.operationId}: tool ${toolName(op.operationId)}`);
    const expected = [op.params, op.query, op.body].flatMap((part) => Object.keys(part?.properties ?? {}));
    if (op.idempotency) expected.push('idempotencyKey');
    assert.deepEqual(Object.keys(tool.inputSchema.properties ?? {}).sort(), expected.sort(), `${op.operationId}: input fields`);
    // Reads are read-only; a POST is only when it says so (a search).
    assert.equal(tool.annotations?.readOnlyHint, op.method === 'GET' || op.operationId === 'searchKnowledge', `${op.operationId}: readOnlyHint`);
    assert.equal(tool.annotations?.destructiveHint, op.destructive, `${op.operationId}: destructiveHint`);
    assert.equal(tool.annotations?.idempotentHint, op.idempotent, `${op.operationId}: idempotentHint`);
    if (op.method === 'DELETE') assert.equal(tool.annotations?.destructiveHint, true);
    assert.equal(tool.outputSchema === undefined, op.status === 204, `${op.operationId}: output schema`);
  }
  await client.close();
});

test('the SDK has a method for every operation, and the committed SDK is what the generator writes', () => {
  const client = new M2MClient({ apiKey: 'm2m_live_x', baseUrl: 'http://127.0.0.1:1/m2m/v1' });
  for (const op of OPERATIONS) {
    let target: unknown = client;
    const names = op.sdk.split('.');
    for (const name of names.slice(0, -1)) target = (target as Record<string, unknown>)[name];
    assert.equal(typeof (target as Record<string, unknown>)[names[names.length - 1]], 'function', `client.${op.sdk}`);
    const meta = SDK_OPERATIONS[op.operationId as keyof typeof SDK_OPERATIONS];
    assert.ok(meta, `${op.operationId} in the SDK`);
    assert.equal(meta.method, op.method);
    assert.equal(meta.path, op.path);
  }
  assert.equal(Object.keys(SDK_OPERATIONS).length, OPERATIONS.length);
  assert.equal(readFileSync(GENERATED_PATH, 'utf8'), generate(), 'packages/client/src/generated.ts is stale: run npm run generate:sdk');
});
