import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { signMetaPayload } from '../../src/channels/providers/meta/signature.js';
import { eventually, startTestApp, type TestApp } from './app.js';
import { startFakeGraph, whatsappTextMessage, type FakeGraph } from './fake-graph.js';
import { b64, buildPng } from '../fixtures/knowledge/build.js';

// The world of the outbound message kinds' tests (decisions 7.2): a server with its workers, the fake Graph API,
// and per test a tenant with a whatsapp_cloud channel whose guest wrote through Meta's signed callback (so the
// guest's message has a provider id to answer, react to and mark read).

export const TOKEN = 'kinds-graph-token';
export const APP_SECRET = 'kinds-app-secret';
const WABA = '102290129340398';
let seq = 0;

export interface KindsHarness {
  app: TestApp;
  graph: FakeGraph;
  close(): Promise<void>;
}

export async function startKinds(env: Record<string, string> = {}): Promise<KindsHarness> {
  const graph = await startFakeGraph();
  const app = await startTestApp({
    startWorkers: true,
    env: { META_APP_SECRET: APP_SECRET, META_VERIFY_TOKEN: 'verify', META_SYSTEM_USER_TOKEN: TOKEN, META_GRAPH_BASE_URL: graph.baseUrl, SEND_MAX_ATTEMPTS: '4', ...env },
  });
  return {
    app,
    graph,
    async close() {
      await app.close();
      await graph.close();
    },
  };
}

export interface World {
  tenantId: string;
  key: string;
  channelId: string;
  phoneNumberId: string;
  /** The guest's wa_id (digits). */
  guest: string;
  conversationId: string;
  /** The guest's message, and its wamid. */
  inboundId: string;
  inboundWamid: string;
}

/** Meta's callback, signed, through the real route; waits until the workers processed it. */
export async function guestWrites(h: KindsHarness, w: Pick<World, 'phoneNumberId' | 'guest'>, text: string, ageSeconds = 0): Promise<{ wamid: string }> {
  const wamid = `wamid.${randomUUID().replace(/-/g, '')}`;
  const raw = Buffer.from(JSON.stringify(whatsappTextMessage({ phoneNumberId: w.phoneNumberId, from: w.guest, id: wamid, timestamp: Math.floor(Date.now() / 1000) - ageSeconds, text })));
  const res = await h.app.runtime.app.inject({
    method: 'POST',
    url: '/providers/meta/webhook',
    headers: { 'content-type': 'application/json', 'x-hub-signature-256': signMetaPayload(APP_SECRET, raw) },
    payload: raw,
  });
  if (res.statusCode !== 200) throw new Error(`callback answered ${res.statusCode}: ${res.body}`);
  const db = h.app.runtime.services.db;
  await eventually(async () => (await db.query('SELECT 1 FROM messages WHERE provider_message_id = $1', [wamid])).length > 0, 20_000, 'the guest message stored');
  return { wamid };
}

export async function world(h: KindsHarness, scopes = ['conversations:read', 'conversations:write', 'messages:read']): Promise<World> {
  const { app, graph } = h;
  const { tenantId, key } = await app.tenantWithKey(scopes);
  const phoneNumberId = String(106540352400000 + ++seq);
  const guest = String(14155550000 + seq);
  graph.addWhatsAppNumber({ phoneNumberId, wabaId: WABA, token: TOKEN });
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, {
    kind: 'whatsapp',
    name: 'Cloud',
    provider: 'whatsapp_cloud',
    connection: { phoneNumberId, wabaId: WABA },
  });
  // The channel's first template sync is a Graph call too: let it pass before a test injects failures.
  await eventually(
    async () => (await app.runtime.services.db.query(`SELECT 1 FROM jobs WHERE task = 'channels.template-sync' AND payload->>'channelId' = $1 AND state = 'succeeded'`, [channelId])).length > 0,
    20_000,
    'the first template sync',
  );
  const { wamid } = await guestWrites(h, { phoneNumberId, guest }, 'Hola 👋 ¿tienen estacionamiento?', 60);
  const [row] = await app.runtime.services.db.query<{ id: string; conversation_id: string }>('SELECT id, conversation_id FROM messages WHERE provider_message_id = $1', [wamid]);
  return { tenantId, key, channelId, phoneNumberId, guest, conversationId: row.conversation_id, inboundId: row.id, inboundWamid: wamid };
}

/** Uploads an asset through the admin API and waits for its validation; `bytes` defaults to a small PNG. */
export async function asset(h: KindsHarness, tenantId: string, fields: { bytes?: Buffer; contentType?: string; filename?: string; folderId?: string } = {}): Promise<{ sourceId: string; bytes: Buffer; validationStatus: string }> {
  const bytes = fields.bytes ?? buildPng();
  const created = await h.app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/assets`, {
    title: 'Parking map',
    filename: fields.filename ?? 'parking.png',
    contentType: fields.contentType ?? 'image/png',
    contentBase64: b64(bytes),
    ...(fields.folderId ? { folderId: fields.folderId } : {}),
  });
  const status = await eventually(
    async () => {
      const [row] = await h.app.runtime.services.db.query<{ validation_status: string }>('SELECT validation_status FROM knowledge_sources WHERE id = $1', [created.sourceId]);
      return row && row.validation_status !== 'pending' ? row.validation_status : undefined;
    },
    20_000,
    'the asset validated',
  );
  return { sourceId: created.sourceId, bytes, validationStatus: status };
}

export function send(h: KindsHarness, key: string, url: string, body: unknown, idempotencyKey: string = randomUUID()): Promise<LightMyRequestResponse> {
  return h.app.api(key, 'POST', url, body, { 'idempotency-key': idempotencyKey });
}

export interface RequestStatus {
  status: string;
  error?: { code: string; message: string };
}

/** Waits for a send to end (sent or failed). */
export function finalStatus(h: KindsHarness, key: string, requestEventId: string): Promise<RequestStatus> {
  return eventually(
    async () => {
      const body = (await h.app.api(key, 'GET', `/message-requests/${requestEventId}/status`)).json() as RequestStatus;
      return body.status === 'sent' || body.status === 'failed' ? body : undefined;
    },
    30_000,
    'a final status',
  );
}

export function reason(res: LightMyRequestResponse): string | undefined {
  return (res.json() as { error?: { details?: { reason?: string } } }).error?.details?.reason;
}
