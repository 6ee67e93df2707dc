import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { eventually, startTestApp, type TestApp } from './app.js';
import { metaFixture, postCallback, startFakeGraph, type FakeGraph } from './fake-graph.js';

// A Messenger or Instagram world for end-to-end tests: the real server listening on 127.0.0.1 with its workers, the
// fake Graph API, and per test a tenant with a channel connected to its own page or account.

/** The ids of Meta's documented examples (test/fixtures/meta/README.md), replaced per world. */
export const FIXTURE_IDS = { page: '682498302938465', psid: '5528374916283745', ig: '17841405822304914', igsid: '6120937452291847' };

export interface MetaWorld {
  tenantId: string;
  key: string;
  channelId: string;
  /** Page id or Instagram account id. */
  accountId: string;
  token: string;
  /** The guest's page-scoped id in this world. */
  guest: string;
}

export interface Message {
  messageId: string;
  type: string;
  text?: string;
  direction: string;
  source: string;
  createdAt: string;
  media?: Record<string, unknown>;
  interactive?: Record<string, unknown>;
  reaction?: Record<string, unknown>;
  replyToMessageId?: string;
  requestEventId?: string;
  status?: string;
  readAt?: string;
}

export const APP_SECRET = 'meta-world-app-secret';
const SCOPES = ['conversations:read', 'conversations:write', 'messages:read', 'channels:read', 'webhooks:read'];

export async function startMetaWorld(env: Record<string, string> = {}) {
  const graph: FakeGraph = await startFakeGraph();
  const app: TestApp = await startTestApp({
    startWorkers: true,
    env: { META_APP_SECRET: APP_SECRET, META_VERIFY_TOKEN: 'verify-me', META_GRAPH_BASE_URL: graph.baseUrl, UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', ...env },
  });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}`;
  const db = app.runtime.services.db;
  let seq = 0;

  async function world(provider: 'messenger' | 'instagram'): Promise<MetaWorld> {
    const { tenantId, key } = await app.tenantWithKey(SCOPES);
    seq++;
    const accountId = String((provider === 'messenger' ? 682498300000000 : 17841405800000000) + seq * 7 + Math.floor(Math.random() * 1000) * 100);
    const guest = String(5528374900000000 + seq * 13 + Math.floor(Math.random() * 1000) * 100);
    const token = `${provider}-token-${seq}-${randomUUID()}`;
    const body =
      provider === 'messenger'
        ? { kind: 'messenger', name: 'Hotel page', provider, connection: { pageId: accountId, pageAccessToken: token } }
        : { kind: 'instagram', name: 'Hotel Instagram', provider, connection: { instagramAccountId: accountId, accessToken: token } };
    if (provider === 'messenger') graph.addPage({ pageId: accountId, token });
    else graph.addInstagramAccount({ instagramAccountId: accountId, token });
    const channel = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, body);
    return { tenantId, key, channelId: channel.channelId, accountId, token, guest };
  }

  /** A documented example with the world's page (or account) and guest in place of the documentation's. */
  function fixtureFor(name: string, w: MetaWorld, replace: Record<string, string> = {}): unknown {
    let text = JSON.stringify(metaFixture(name));
    // The examples' CDN links point at the fake CDN: no test reaches out of 127.0.0.1.
    const cdn = `${graph.baseUrl}/cdn/`;
    const pairs: Record<string, string> = {
      [FIXTURE_IDS.page]: w.accountId,
      [FIXTURE_IDS.ig]: w.accountId,
      [FIXTURE_IDS.psid]: w.guest,
      [FIXTURE_IDS.igsid]: w.guest,
      'https://scontent.xx.fbcdn.net/': cdn,
      'https://cdn.fbsbx.com/': cdn,
      'https://lookaside.fbsbx.com/': cdn,
      'https://example.com/': cdn,
      ...replace,
    };
    for (const [from, to] of Object.entries(pairs)) text = text.split(from).join(to);
    return JSON.parse(text);
  }

  async function allProcessed(): Promise<void> {
    await eventually(async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM provider_callbacks WHERE processed_at IS NULL'))[0].n === 0, 30_000, 'callbacks processed');
  }

  async function post(payload: unknown) {
    const res = await postCallback(`${baseUrl}/providers/meta/webhook`, payload, APP_SECRET);
    assert.equal(res.status, 200, res.body);
    return res;
  }

  async function conversationsOf(w: MetaWorld): Promise<Array<{ conversationId: string; unreadCount: number; needsReply: boolean }>> {
    const res = await app.api(w.key, 'GET', '/conversations');
    assert.equal(res.statusCode, 200, res.body);
    return (res.json() as { conversations: Array<{ conversationId: string; unreadCount: number; needsReply: boolean }> }).conversations;
  }

  async function onlyConversation(w: MetaWorld): Promise<string> {
    const conversations = await conversationsOf(w);
    assert.equal(conversations.length, 1, 'one conversation');
    return conversations[0].conversationId;
  }

  /** Newest first. */
  async function messagesOf(w: MetaWorld, conversationId: string): Promise<Message[]> {
    const res = await app.api(w.key, 'GET', `/conversations/${conversationId}/messages?limit=100`);
    assert.equal(res.statusCode, 200, res.body);
    return (res.json() as { messages: Message[] }).messages;
  }

  async function eventsOf(w: MetaWorld, type: string): Promise<Array<Record<string, unknown>>> {
    const rows = await db.query<{ body: string }>('SELECT body FROM webhook_events WHERE tenant_id = $1 AND type = $2 ORDER BY created_at, id', [w.tenantId, type]);
    return rows.map((row) => (JSON.parse(row.body) as { data: Record<string, unknown> }).data);
  }

  async function contactsOf(w: MetaWorld) {
    return db.query<{ id: string; handle: string | null; name: string | null; phone_e164: string | null }>('SELECT id, handle, name, phone_e164 FROM contacts WHERE tenant_id = $1 ORDER BY created_at', [w.tenantId]);
  }

  async function reply(w: MetaWorld, conversationId: string, text: string) {
    return app.api(w.key, 'POST', `/conversations/${conversationId}/messages`, { text }, { 'idempotency-key': randomUUID() });
  }

  /** The provider message id a reply was sent under, once the send job recorded it. */
  async function sentId(requestEventId: string): Promise<string> {
    return eventually(
      async () => (await db.query<{ provider_message_id: string | null }>('SELECT provider_message_id FROM message_requests WHERE id = $1', [requestEventId]))[0]?.provider_message_id ?? undefined,
      30_000,
      'the send recorded',
    );
  }

  async function finalStatus(w: MetaWorld, requestEventId: string) {
    return eventually(
      async () => {
        const res = await app.api(w.key, 'GET', `/message-requests/${requestEventId}/status`);
        const body = res.json() as { status: string; error?: { code: string; message: string } };
        return body.status === 'sent' || body.status === 'failed' ? body : undefined;
      },
      30_000,
      'a final status',
    );
  }

  return {
    app,
    graph,
    baseUrl,
    db,
    world,
    fixtureFor,
    allProcessed,
    post,
    conversationsOf,
    onlyConversation,
    messagesOf,
    eventsOf,
    contactsOf,
    reply,
    sentId,
    finalStatus,
    async close() {
      await app.close();
      await graph.close();
    },
  };
}

export type MetaWorldHarness = Awaited<ReturnType<typeof startMetaWorld>>;
