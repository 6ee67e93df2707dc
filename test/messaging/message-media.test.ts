import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { eventually } from '../helpers/app.js';
import { signMetaPayload } from '../../src/channels/providers/meta/signature.js';
import { whatsappImageMessage } from '../helpers/fake-graph.js';
import { APP_SECRET, TOKEN, asset, finalStatus, send, startKinds, world, type KindsHarness, type World } from '../helpers/kinds-world.js';
import { M2MClient } from '../../packages/client/src/index.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

// GET /conversations/{id}/messages/{messageId}/media (decisions 7.2): the stored bytes with Content-Type,
// Content-Length and Content-Disposition: attachment; a message without media 404; media still downloading 409
// media_pending, failed 409 media_failed. The same through the SDK (bytes) and an outbound attachment's copy.

let h: KindsHarness;
before(async () => {
  h = await startKinds({ MEDIA_MAX_BYTES: '1000', MCP_ENABLED: 'true' });
});
after(async () => {
  await h.close();
});

/** A guest image through Meta's signed callback; `mediaId` registered on the fake Graph API when `bytes` are given. */
async function guestImage(w: World, bytes: Buffer | undefined): Promise<string> {
  const mediaId = String(Math.floor(Math.random() * 1e12));
  if (bytes) h.graph.addMedia({ mediaId, bytes, mimeType: 'image/jpeg', token: TOKEN });
  const wamid = `wamid.${randomUUID().replace(/-/g, '')}`;
  const raw = Buffer.from(JSON.stringify(whatsappImageMessage({ phoneNumberId: w.phoneNumberId, from: w.guest, id: wamid, timestamp: Math.floor(Date.now() / 1000), mediaId, caption: 'la puerta 🚪' })));
  const res = await h.app.runtime.app.inject({ method: 'POST', url: '/providers/meta/webhook', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signMetaPayload(APP_SECRET, raw) }, payload: raw });
  assert.equal(res.statusCode, 200);
  const [row] = await eventually(async () => {
    const rows = await h.app.runtime.services.db.query<{ id: string }>('SELECT id FROM messages WHERE provider_message_id = $1', [wamid]);
    return rows.length > 0 ? rows : undefined;
  }, 20_000, 'the image message');
  return row.id;
}

async function mediaStatus(w: World, messageId: string, status: string) {
  return eventually(async () => {
    const { message } = (await h.app.api(w.key, 'GET', `/conversations/${w.conversationId}/messages/${messageId}`)).json() as { message: { media?: { status: string } } };
    return message.media?.status === status ? message : undefined;
  }, 20_000, `media ${status}`);
}

test('inbound media: the stored bytes with Content-Type, Content-Length and Content-Disposition; the SDK returns them', async () => {
  const w = await world(h);
  const bytes = Buffer.from([0xff, 0xd8, 0xff, 0xe0, ...Array.from({ length: 200 }, (_, i) => i % 256), 0xff, 0xd9]);
  const messageId = await guestImage(w, bytes);
  await mediaStatus(w, messageId, 'ready');
  const res = await h.app.api(w.key, 'GET', `/conversations/${w.conversationId}/messages/${messageId}/media`);
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.headers['content-type'], 'image/jpeg');
  assert.equal(res.headers['content-length'], String(bytes.length));
  assert.match(String(res.headers['content-disposition']), /^attachment; filename="msg_[A-Za-z0-9_]+\.jpg"/);
  assert.deepEqual(res.rawPayload, bytes);

  await h.app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  const address = h.app.runtime.app.server.address();
  assert.ok(address && typeof address === 'object');
  const client = new M2MClient({ apiKey: w.key, baseUrl: `http://127.0.0.1:${address.port}/m2m/v1` });
  const downloaded = await client.conversations.messages.media({ conversationId: w.conversationId, messageId });
  assert.ok(downloaded instanceof Uint8Array);
  assert.deepEqual(Buffer.from(downloaded), bytes);

  // MCP: the description, with the bytes in base64 (small enough to inline).
  const mcp = new Client({ name: 'media', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${address.port}/m2m/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${w.key}` } } }));
  const result = await mcp.callTool({ name: 'get_message_media', arguments: { conversationId: w.conversationId, messageId } });
  await mcp.close();
  assert.notEqual(result.isError, true, JSON.stringify(result));
  const described = result.structuredContent as { contentType: string; sizeBytes: number; contentBase64?: string };
  assert.equal(described.contentType, 'image/jpeg');
  assert.equal(described.sizeBytes, bytes.length);
  assert.deepEqual(Buffer.from(described.contentBase64 ?? '', 'base64'), bytes);
});

test('an outbound attachment is served from the copy kept with the reply', async () => {
  const w = await world(h);
  const image = await asset(h, w.tenantId, { filename: 'mapa del estacionamiento.png' });
  const res = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { assetSourceId: image.sourceId });
  const { messageId, requestEventId } = res.json() as { messageId: string; requestEventId: string };
  await finalStatus(h, w.key, requestEventId);
  const media = await h.app.api(w.key, 'GET', `/conversations/${w.conversationId}/messages/${messageId}/media`);
  assert.equal(media.statusCode, 200, media.body);
  assert.equal(media.headers['content-type'], 'image/png');
  assert.equal(media.headers['content-disposition'], `attachment; filename="mapa del estacionamiento.png"; filename*=UTF-8''mapa%20del%20estacionamiento.png`);
  assert.deepEqual(media.rawPayload, image.bytes);
});

test('no media 404, unknown message 404; pending 409 media_pending; failed 409 media_failed with the reason', async () => {
  const w = await world(h);
  const base = `/conversations/${w.conversationId}/messages`;
  const text = await h.app.api(w.key, 'GET', `${base}/${w.inboundId}/media`);
  assert.equal(text.statusCode, 404, text.body);
  assert.equal((await h.app.api(w.key, 'GET', `${base}/msg_missing/media`)).statusCode, 404);

  const tooLarge = await guestImage(w, Buffer.alloc(5000, 7));
  await mediaStatus(w, tooLarge, 'failed');
  const failed = await h.app.api(w.key, 'GET', `${base}/${tooLarge}/media`);
  assert.equal(failed.statusCode, 409, failed.body);
  const failedError = (failed.json() as { error: { code: string; details: { reason: string; mediaReason: string } } }).error;
  assert.equal(failedError.code, 'M2M_CONFLICT');
  assert.deepEqual([failedError.details.reason, failedError.details.mediaReason], ['media_failed', 'too_large']);

  // A media whose download has not finished: pending (set once its job is over, so nothing moves it again).
  const pending = await guestImage(w, undefined);
  await mediaStatus(w, pending, 'failed');
  await h.app.runtime.services.db.query(`UPDATE messages SET media = jsonb_set(media, '{status}', '"pending"') WHERE id = $1`, [pending]);
  const waiting = await h.app.api(w.key, 'GET', `${base}/${pending}/media`);
  assert.equal(waiting.statusCode, 409, waiting.body);
  assert.equal((waiting.json() as { error: { details: { reason: string } } }).error.details.reason, 'media_pending');
  assert.ok(waiting.headers['x-request-id']);
});
