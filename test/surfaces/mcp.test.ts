import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

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
  for (const name of ['list_conversations', 'mark_conversation_read', 'resolve_needs_reply', 'get_whatsapp_template_status']) assert.ok(names.includes(name), name);
  // Only the tools the key's scopes allow are offered.
  for (const name of ['start_conversation', 'send_follow_up', 'update_follow_up_settings', 'create_webhook']) assert.ok(!names.includes(name), name);
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

function toolNames(tools: Array<{ name: string }>): string[] {
  return tools.map((t) => t.name).sort();
}

async function connectTo(url: string, key: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${key}`, ...headers } } }));
  return client;
}

test('a knowledge:read key sees only the knowledge read tools; toolsets and read-only mode narrow the list', async () => {
  const reader = await app.tenantWithKey(['knowledge:read']);
  const onlyKnowledge = await connectTo(base, reader.key);
  const readerTools = (await onlyKnowledge.listTools()).tools;
  for (const name of ['get_crawl_job', 'list_crawl_jobs', 'list_knowledge_items']) assert.ok(readerTools.some((t) => t.name === name), name);
  // Knowledge reads, and the event feed (a knowledge:read key reads the crawl events): nothing that writes.
  for (const tool of readerTools) assert.ok(tool.annotations?.readOnlyHint === true && /knowledge|crawl|event/.test(tool.name), tool.name);
  await onlyKnowledge.close();

  const wide = await app.tenantWithKey(['knowledge:write', 'webhooks:write', 'crm:followups:write']);
  const all = toolNames((await (await connectTo(base, wide.key)).listTools()).tools);
  assert.ok(all.includes('create_webhook') && all.includes('create_knowledge_source') && all.includes('send_follow_up'));

  const knowledge = await connectTo(`${base}?toolsets=knowledge`, wide.key);
  const knowledgeTools = toolNames((await knowledge.listTools()).tools);
  assert.ok(knowledgeTools.length > 3 && knowledgeTools.every((name) => /knowledge|crawl|folder|asset|website/.test(name)), knowledgeTools.join());
  await knowledge.close();

  const readOnly = await connectTo(`${base}?toolsets=knowledge,webhooks&readonly=true`, wide.key);
  const readTools = (await readOnly.listTools()).tools;
  assert.ok(readTools.length > 0);
  for (const tool of readTools) assert.equal(tool.annotations?.readOnlyHint, true, tool.name);
  assert.ok(readTools.some((tool) => tool.name === 'list_webhooks') && !readTools.some((tool) => tool.name === 'create_webhook'));
  const hidden = await readOnly.callTool({ name: 'create_webhook', arguments: { url: 'https://hooks.example.com/x', events: ['message.created'] } });
  assert.equal(hidden.isError, true, 'a hidden tool cannot be called');
  await readOnly.close();

  const byHeader = await connectTo(base, wide.key, { 'x-mcp-toolsets': 'crm', 'x-mcp-readonly': 'true' });
  assert.deepEqual(toolNames((await byHeader.listTools()).tools), ['get_follow_up', 'list_follow_ups']);
  await byHeader.close();

  const res = await fetch(`${base}?toolsets=nonsense`, {
    method: 'POST',
    headers: { authorization: `Bearer ${wide.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  assert.equal(res.status, 400);
  assert.ok(res.headers.get('x-request-id'));
  const body = await res.json();
  assert.equal(body.error.code, 'M2M_INVALID_REQUEST');
  assert.match(body.error.message, /nonsense/);
});

test('list tools page with limit and nextCursor; create tools honour idempotencyKey; results match the output schema', async () => {
  const { tenantId, key } = await app.tenantWithKey(['crm:followups:write', 'webhooks:write', 'messages:read']);
  const channel = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'webchat', name: 'Web' });
  const conversation = await app.admin<{ conversationId: string }>('POST', `/tenants/${tenantId}/inbound-messages`, { channelId: channel.channelId, contact: { handle: 'p' }, text: 'hi' });
  const lead = await app.admin<{ leadId: string }>('POST', `/tenants/${tenantId}/leads`, { name: 'P', conversationId: conversation.conversationId });
  const client = await connectTo(base, key);
  for (let i = 0; i < 3; i++) {
    const created = await client.callTool({ name: 'create_follow_up', arguments: { leadId: lead.leadId, conversationId: conversation.conversationId, messageDraft: `draft ${i}` } });
    assert.ok(!created.isError, JSON.stringify(created));
  }
  // The official client validates structuredContent against each tool's outputSchema.
  const first = await client.callTool({ name: 'list_follow_ups', arguments: { limit: 2 } });
  const page1 = first.structuredContent as { followUps: Array<{ followUpId: string }>; nextCursor?: string; hasMore: boolean };
  assert.equal(page1.followUps.length, 2);
  assert.equal(page1.hasMore, true);
  assert.ok(page1.nextCursor);
  const page2 = (await client.callTool({ name: 'list_follow_ups', arguments: { limit: 2, cursor: page1.nextCursor } })).structuredContent as typeof page1;
  assert.equal(page2.followUps.length, 1);
  assert.equal(page2.hasMore, false);
  assert.equal(new Set([...page1.followUps, ...page2.followUps].map((f) => f.followUpId)).size, 3);

  const args = { url: 'https://hooks.example.com/mcp', events: ['message.delivery.updated'], idempotencyKey: 'create-once' };
  const a = parsed(await client.callTool({ name: 'create_webhook', arguments: args }));
  const b = parsed(await client.callTool({ name: 'create_webhook', arguments: args }));
  assert.equal(a.subscriptionId, b.subscriptionId, 'the retry replays the first answer');
  assert.equal(a.secret, b.secret);
  const conflict = await client.callTool({ name: 'create_webhook', arguments: { ...args, url: 'https://hooks.example.com/other' } });
  assert.equal(parsed(conflict).error.code, 'M2M_IDEMPOTENCY_CONFLICT');
  const list = await app.api(key, 'GET', '/webhooks');
  assert.equal(list.json().subscriptions.length, 1);
  const stored = await app.runtime.services.db.query<{ body: string }>('SELECT response_body::text AS body FROM idempotency_keys WHERE tenant_id = $1', [tenantId]);
  assert.ok(stored.length > 0 && stored.every((row) => !row.body.includes(a.secret)), 'stored answers never hold the signing secret in clear');
  await client.close();
});

test('bad tool arguments are invalid params, refused before anything recurses over them; responses carry X-Request-Id', async () => {
  const { key } = await app.tenantWithKey(['conversations:read']);
  const call = (args: unknown) =>
    fetch(base, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_conversations', arguments: args } }),
    });
  // Deeper than MCP’s 16 levels but within the body guard’s 32, so MCP itself answers.
  let deep: unknown = 'x';
  for (let i = 0; i < 20; i++) deep = { a: deep };
  for (const args of [null, [], 'text', 42, deep]) {
    const res = await call(args);
    assert.equal(res.status, 200);
    assert.ok(res.headers.get('x-request-id'));
    const body = await res.json();
    assert.equal(body.error.code, -32602, JSON.stringify(body).slice(0, 200));
    assert.equal(body.id, 7);
  }
  const ok = await call({ limit: 5 });
  assert.ok(ok.headers.get('x-request-id'), 'a successful MCP answer carries X-Request-Id too');
  const result = await ok.json();
  assert.equal(result.result.isError, undefined);
});

test('a body nested past the input limit is refused in the envelope before MCP parses it', async () => {
  const { key } = await app.tenantWithKey(['conversations:read']);
  let deep: unknown = 'x';
  for (let i = 0; i < 3000; i++) deep = { a: deep };
  const res = await fetch(base, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_conversations', arguments: deep } }),
  });
  assert.ok(res.headers.get('x-request-id'));
  const body = await res.json();
  // Refused either by the body guard (envelope) or by MCP's own check (JSON-RPC invalid params), never run.
  if (res.status === 200) assert.equal(body.error.code, -32602);
  else assert.ok((res.status === 400 || res.status === 413) && /^M2M_/.test(body.error.code), String(res.status));
});
