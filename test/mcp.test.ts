import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestApp, type TestApp } from './helpers/app.js';

let app: TestApp;
let base: string;

before(async () => {
  app = await startTestApp({ env: { MCP_ENABLED: 'true' } });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}/m2m/v1/mcp`;
});
after(() => app.close());

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(base), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

function parsed(result: Awaited<ReturnType<Client['callTool']>>) {
  const content = result.content as Array<{ type: string; text: string }>;
  return JSON.parse(content[0].text);
}

test('the official MCP client lists tools and calls them with the same rules as the REST API', async () => {
  const { tenantId, key } = await app.tenantWithKey(['conversations:read', 'conversations:triage:write']);
  const channel = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'webchat', name: 'Web' });
  const inbound = await app.admin<{ conversationId: string }>('POST', `/tenants/${tenantId}/inbound-messages`, {
    channelId: channel.channelId,
    contact: { name: 'Lucía', handle: 'lucia-web' },
    text: 'Is breakfast included?',
  });
  const client = await connect(key);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const name of ['list_conversations', 'mark_conversation_read', 'start_conversation', 'send_follow_up', 'update_follow_up_settings']) assert.ok(names.includes(name), name);
  const listTool = tools.find((t) => t.name === 'list_conversations')!;
  assert.equal((listTool.inputSchema as { additionalProperties?: boolean }).additionalProperties, false);

  const listed = await client.callTool({ name: 'list_conversations', arguments: { contactQuery: 'luc' } });
  assert.ok(!listed.isError);
  const page = parsed(listed);
  assert.equal(page.conversations.length, 1);
  assert.equal(page.conversations[0].conversationId, inbound.conversationId);

  const read = parsed(await client.callTool({ name: 'mark_conversation_read', arguments: { conversationId: inbound.conversationId } }));
  assert.equal(read.changed, true);
  assert.equal(read.unreadCountBefore, 1);
  await client.close();
});

test('tool calls check scopes, validate input and keep tenants apart', async () => {
  const mine = await app.tenantWithKey(['conversations:read']);
  const other = await app.tenantWithKey(['conversations:read', 'conversations:triage:write']);
  const channel = await app.admin<{ channelId: string }>('POST', `/tenants/${mine.tenantId}/channels`, { kind: 'webchat', name: 'Web' });
  const inbound = await app.admin<{ conversationId: string }>('POST', `/tenants/${mine.tenantId}/inbound-messages`, { channelId: channel.channelId, contact: { handle: 'x' }, text: 'hi' });
  const client = await connect(mine.key);

  const denied = await client.callTool({ name: 'mark_conversation_read', arguments: { conversationId: inbound.conversationId } });
  assert.equal(denied.isError, true);
  assert.deepEqual(parsed(denied).error.details, { requiredScopes: ['conversations:triage:write'], missingScopes: ['conversations:triage:write'] });

  const invalid = await client.callTool({ name: 'list_conversations', arguments: { contactQuery: 'x', colour: 'red' } });
  assert.equal(invalid.isError, true);
  assert.equal(parsed(invalid).error.code, 'M2M_INVALID_REQUEST');
  await client.close();

  const foreign = await connect(other.key);
  const notFound = await foreign.callTool({ name: 'mark_conversation_read', arguments: { conversationId: inbound.conversationId } });
  assert.equal(notFound.isError, true);
  assert.equal(parsed(notFound).error.code, 'M2M_NOT_FOUND');
  await foreign.close();
});

test('MCP needs a valid bearer key', async () => {
  const res = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error.code, 'M2M_AUTH_MISSING_CREDENTIALS');
});
