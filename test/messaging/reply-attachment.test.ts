import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../helpers/app.js';
import { asset, finalStatus, send, startKinds, world, type KindsHarness } from '../helpers/kinds-world.js';
import { buildPdf } from '../fixtures/knowledge/build.js';

// A reply with a knowledge asset attached (decisions 7.2), end to end against the fake Graph API: the asset's bytes
// are uploaded (POST /{phone-number-id}/media) and the message sent by that id, answering the guest's message; a
// retried send never uploads or sends twice; an asset deleted after the reply was accepted still goes out.

let h: KindsHarness;
before(async () => {
  h = await startKinds();
});
after(async () => {
  await h.close();
});

interface Accepted {
  messageId: string;
  requestEventId: string;
}

test('an image reply: uploaded once, sent by its media id with the caption and the reply-to context; the bytes arrive', async () => {
  const w = await world(h);
  const image = await asset(h, w.tenantId);
  assert.equal(image.validationStatus, 'ready');
  const caption = 'Aquí está el mapa 🅿️🚗';
  const res = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: caption, assetSourceId: image.sourceId, replyToMessageId: w.inboundId });
  assert.equal(res.statusCode, 202, res.body);
  const accepted = res.json() as Accepted;
  const status = await finalStatus(h, w.key, accepted.requestEventId);
  assert.equal(status.status, 'sent', JSON.stringify(status));

  const uploads = h.graph.sent(w.phoneNumberId, 'media');
  assert.equal(uploads.length, 1);
  assert.deepEqual(uploads[0].form, { messaging_product: 'whatsapp', type: 'image/png', file: { filename: 'parking.png', type: 'image/png', size: image.bytes.length } });
  const messages = h.graph.sent(w.phoneNumberId, 'messages').filter((r) => r.status === 200);
  assert.equal(messages.length, 1);
  const body = messages[0].json as { type: string; image: { id: string; caption: string }; context: { message_id: string }; to: string };
  assert.equal(body.type, 'image');
  assert.equal(body.image.caption, caption);
  assert.equal(body.context.message_id, w.inboundWamid);
  assert.equal(body.to, w.guest);
  assert.deepEqual(h.graph.mediaBytes(body.image.id), image.bytes, 'the asset\'s bytes reached Meta');

  const read = await h.app.api(w.key, 'GET', `/conversations/${w.conversationId}/messages/${accepted.messageId}`);
  const { message } = read.json() as { message: Record<string, unknown> };
  assert.equal(message.type, 'image');
  assert.equal(message.text, caption);
  assert.equal(message.replyToMessageId, w.inboundId);
  assert.deepEqual(message.media, { contentType: 'image/png', sizeBytes: image.bytes.length, filename: 'parking.png', status: 'ready' });
});

test('a document reply without text; a text reply answering a message carries the context', async () => {
  const w = await world(h);
  const pdf = await asset(h, w.tenantId, { bytes: buildPdf([['Check-in from 15:00']]), contentType: 'application/pdf', filename: 'house-rules.pdf' });
  assert.equal(pdf.validationStatus, 'ready');
  const doc = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { assetSourceId: pdf.sourceId });
  assert.equal(doc.statusCode, 202, doc.body);
  assert.equal((await finalStatus(h, w.key, (doc.json() as Accepted).requestEventId)).status, 'sent');
  const text = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: 'Sí, gratis 🙂', replyToMessageId: w.inboundId });
  assert.equal(text.statusCode, 202, text.body);
  assert.equal((await finalStatus(h, w.key, (text.json() as Accepted).requestEventId)).status, 'sent');

  const [docSent, textSent] = h.graph.sent(w.phoneNumberId, 'messages').map((r) => r.json as Record<string, unknown>);
  assert.equal(docSent.type, 'document');
  const document = docSent.document as { id: string; filename: string; caption?: string };
  assert.equal(document.filename, 'house-rules.pdf');
  assert.equal(document.caption, undefined);
  assert.deepEqual(h.graph.mediaBytes(document.id), pdf.bytes);
  assert.deepEqual(textSent, { messaging_product: 'whatsapp', recipient_type: 'individual', to: w.guest, context: { message_id: w.inboundWamid }, type: 'text', text: { body: 'Sí, gratis 🙂', preview_url: false } });
});

test('a send retried after a throttled /messages reuses the uploaded media: one upload, one message sent', async () => {
  const w = await world(h);
  const image = await asset(h, w.tenantId);
  h.graph.failNext(1, { status: 400, code: 130429, message: '(#130429) Rate limit hit', edge: 'messages' });
  const res = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: 'Mapa', assetSourceId: image.sourceId });
  assert.equal(res.statusCode, 202, res.body);
  const status = await finalStatus(h, w.key, (res.json() as Accepted).requestEventId);
  assert.equal(status.status, 'sent', JSON.stringify(status));
  assert.equal(h.graph.sent(w.phoneNumberId, 'media').length, 1, 'uploaded once');
  const messages = h.graph.sent(w.phoneNumberId, 'messages');
  assert.deepEqual(messages.map((r) => r.status), [400, 200], 'refused once, then sent once');
  const ids = messages.map((r) => (r.json as { image: { id: string } }).image.id);
  assert.equal(ids[0], ids[1], 'the retry sent the media id of the first upload');
});

test('a replayed Idempotency-Key answers the first 202 (the asset deleted since) and sends nothing again', async () => {
  const w = await world(h);
  const image = await asset(h, w.tenantId);
  const key = `kinds-replay-${w.conversationId}`;
  const first = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { assetSourceId: image.sourceId }, key);
  assert.equal(first.statusCode, 202, first.body);
  await finalStatus(h, w.key, (first.json() as Accepted).requestEventId);
  // Even with the asset gone since, the retry answers what the key stored.
  const writer = await h.app.admin<{ key: string }>('POST', `/tenants/${w.tenantId}/api-keys`, { name: 'knowledge', scopes: ['knowledge:write'] });
  assert.equal((await h.app.api(writer.key, 'DELETE', `/knowledge/sources/${image.sourceId}`)).statusCode, 204);
  const again = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { assetSourceId: image.sourceId }, key);
  assert.equal(again.statusCode, 202);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.deepEqual(again.json(), first.json());
  assert.equal(h.graph.sent(w.phoneNumberId, 'media').length, 1);
  assert.equal(h.graph.sent(w.phoneNumberId, 'messages').length, 1);
  const db = h.app.runtime.services.db;
  assert.equal((await db.query(`SELECT 1 FROM messages WHERE conversation_id = $1 AND direction = 'outbound'`, [w.conversationId])).length, 1);
});

test('an asset deleted right after its reply was accepted: the reply still sends the bytes copied at acceptance', async () => {
  const w = await world(h);
  const image = await asset(h, w.tenantId);
  const writer = await h.app.admin<{ key: string }>('POST', `/tenants/${w.tenantId}/api-keys`, { name: 'knowledge', scopes: ['knowledge:write'] });
  // Slow answers keep the send in flight while the asset goes.
  h.graph.setDelay(200);
  const res = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { assetSourceId: image.sourceId });
  assert.equal(res.statusCode, 202, res.body);
  const deleted = await h.app.api(writer.key, 'DELETE', `/knowledge/sources/${image.sourceId}`);
  assert.equal(deleted.statusCode, 204, deleted.body);
  const status = await finalStatus(h, w.key, (res.json() as Accepted).requestEventId);
  h.graph.setDelay(0);
  assert.equal(status.status, 'sent', JSON.stringify(status));
  const sent = await eventually(async () => h.graph.sent(w.phoneNumberId, 'messages')[0], 10_000, 'the message');
  assert.deepEqual(h.graph.mediaBytes((sent.json as { image: { id: string } }).image.id), image.bytes);
});
