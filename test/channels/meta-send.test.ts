import { test, describe, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { GraphClient, GraphError, MediaDownloadError } from '../../src/channels/providers/meta/graph-client.js';
import { MessengerSendApiProvider } from '../../src/channels/providers/meta/messenger.js';
import { WhatsAppCloudProvider } from '../../src/channels/providers/meta/whatsapp.js';
import { ChannelSendError, type InstagramConnection, type MessengerConnection, type WhatsAppCloudConnection } from '../../src/channels/providers/types.js';
import { startFakeGraph, type FakeGraph } from '../helpers/fake-graph.js';

// The WhatsApp and Messenger/Instagram providers against the fake Graph API: each request as Meta documents it,
// Meta's errors mapped (code, retryable, window), and media downloads under their caps.

const WA: WhatsAppCloudConnection = { provider: 'whatsapp_cloud', phoneNumberId: '106540352242922', wabaId: '102290129340398', accessToken: 'wa-token' };
const PAGE: MessengerConnection = { provider: 'messenger', pageId: '682498302938465', pageAccessToken: 'page-token' };
const IG: InstagramConnection = { provider: 'instagram', instagramAccountId: '17841405822304914', accessToken: 'ig-token' };
const GUEST = '+16505551234';
const PSID = '5528374916283745';
const signal = new AbortController().signal;

let fake: FakeGraph;
let graph: GraphClient;
let whatsapp: WhatsAppCloudProvider;
let messenger: MessengerSendApiProvider<'messenger'>;
let instagram: MessengerSendApiProvider<'instagram'>;

before(async () => {
  fake = await startFakeGraph({ apiVersion: 'v23.0' });
  fake.addWhatsAppNumber({ phoneNumberId: WA.phoneNumberId, wabaId: WA.wabaId, token: WA.accessToken });
  fake.addPage({ pageId: PAGE.pageId, token: PAGE.pageAccessToken });
  fake.addInstagramAccount({ instagramAccountId: IG.instagramAccountId, token: IG.accessToken });
  graph = new GraphClient({ baseUrl: fake.baseUrl, apiVersion: 'v23.0', timeoutMs: 1000 });
  whatsapp = new WhatsAppCloudProvider(graph);
  messenger = new MessengerSendApiProvider('messenger', graph);
  instagram = new MessengerSendApiProvider('instagram', graph);
});
after(() => fake.close());
beforeEach(() => fake.reset());

async function rejects(promise: Promise<unknown>): Promise<GraphError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof GraphError, `a GraphError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a rejection');
}

describe('WhatsApp Cloud API', () => {
  test('text: the documented body, bearer token, a wamid back', async () => {
    const result = await whatsapp.send({ kind: 'text', text: 'Hola 👋🏽', recipient: { phone: GUEST }, replyToProviderMessageId: 'wamid.CTX' }, WA, signal);
    assert.match(result.providerMessageId ?? '', /^wamid\./);
    const [request] = fake.sent(WA.phoneNumberId, 'messages');
    assert.equal(request.path, `/v23.0/${WA.phoneNumberId}/messages`);
    assert.equal(request.headers.authorization, 'Bearer wa-token');
    assert.deepEqual(request.json, { messaging_product: 'whatsapp', recipient_type: 'individual', to: '16505551234', context: { message_id: 'wamid.CTX' }, type: 'text', text: { body: 'Hola 👋🏽', preview_url: false } });
  });

  test('template with its body parameter', async () => {
    await whatsapp.send({ kind: 'template', name: 'conversation_start', locale: 'es_MX', bodyParameters: ['Ana'], recipient: { phone: GUEST } }, WA, signal);
    assert.deepEqual(fake.sent(WA.phoneNumberId, 'messages')[0].json, {
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '16505551234',
      type: 'template',
      template: { name: 'conversation_start', language: { code: 'es_MX' }, components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ana' }] }] },
    });
  });

  test('upload, then media by id with caption and filename', async () => {
    const { providerMediaId } = await whatsapp.upload({ mediaKind: 'document', contentType: 'application/pdf', filename: 'menu.pdf', bytes: Buffer.from('%PDF-1.4 test') }, WA, signal);
    const upload = fake.sent(WA.phoneNumberId, 'media')[0];
    assert.deepEqual(upload.form, { messaging_product: 'whatsapp', type: 'application/pdf', file: { filename: 'menu.pdf', type: 'application/pdf', size: 13 } });
    await whatsapp.send({ kind: 'media', mediaKind: 'document', providerMediaId, caption: 'Our menu', filename: 'menu.pdf', recipient: { phone: GUEST } }, WA, signal);
    await whatsapp.send({ kind: 'media', mediaKind: 'image', providerMediaId, caption: 'A view', recipient: { phone: GUEST } }, WA, signal);
    const [documentBody, imageBody] = fake.sent(WA.phoneNumberId, 'messages').map((r) => r.json);
    assert.deepEqual(documentBody, { messaging_product: 'whatsapp', recipient_type: 'individual', to: '16505551234', type: 'document', document: { id: providerMediaId, caption: 'Our menu', filename: 'menu.pdf' } });
    assert.deepEqual(imageBody, { messaging_product: 'whatsapp', recipient_type: 'individual', to: '16505551234', type: 'image', image: { id: providerMediaId, caption: 'A view' } });
  });

  test('audio takes no caption: the caption follows as text', async () => {
    const result = await whatsapp.send({ kind: 'media', mediaKind: 'audio', providerMediaId: '42', caption: 'Listen', recipient: { phone: GUEST } }, WA, signal);
    assert.equal(result.additionalProviderMessageIds?.length, 1);
    const bodies = fake.sent(WA.phoneNumberId, 'messages').map((r) => r.json);
    assert.deepEqual(bodies[0], { messaging_product: 'whatsapp', recipient_type: 'individual', to: '16505551234', type: 'audio', audio: { id: '42' } });
    assert.deepEqual(bodies[1], { messaging_product: 'whatsapp', recipient_type: 'individual', to: '16505551234', type: 'text', text: { body: 'Listen', preview_url: false } });
  });

  test('reaction, and its removal with an empty emoji', async () => {
    await whatsapp.send({ kind: 'reaction', targetProviderMessageId: 'wamid.IN', emoji: '❤️', recipient: { phone: GUEST } }, WA, signal);
    await whatsapp.send({ kind: 'reaction', targetProviderMessageId: 'wamid.IN', emoji: '', recipient: { phone: GUEST } }, WA, signal);
    const bodies = fake.sent(WA.phoneNumberId, 'messages').map((r) => r.json);
    assert.deepEqual(bodies[0], { messaging_product: 'whatsapp', recipient_type: 'individual', to: '16505551234', type: 'reaction', reaction: { message_id: 'wamid.IN', emoji: '❤️' } });
    assert.deepEqual(bodies[1], { messaging_product: 'whatsapp', recipient_type: 'individual', to: '16505551234', type: 'reaction', reaction: { message_id: 'wamid.IN', emoji: '' } });
  });

  test('read receipt with typing indicator; typing alone needs the guest message', async () => {
    assert.deepEqual(await whatsapp.send({ kind: 'read_receipt', providerMessageId: 'wamid.IN', typingIndicator: true, recipient: { phone: GUEST } }, WA, signal), {});
    await whatsapp.send({ kind: 'typing', providerMessageId: 'wamid.IN', recipient: { phone: GUEST } }, WA, signal);
    const bodies = fake.sent(WA.phoneNumberId, 'messages').map((r) => r.json);
    assert.deepEqual(bodies[0], { messaging_product: 'whatsapp', status: 'read', message_id: 'wamid.IN', typing_indicator: { type: 'text' } });
    assert.deepEqual(bodies[1], bodies[0]);
    await assert.rejects(whatsapp.send({ kind: 'typing', recipient: { phone: GUEST } }, WA, signal), (e) => e instanceof ChannelSendError && e.code === 'typing_needs_message');
  });

  test('the fake refuses what Meta would: a bad body 400/100, a bad token 401/190', async () => {
    const bad = await rejects(graph.call({ method: 'POST', path: `/${WA.phoneNumberId}/messages`, token: WA.accessToken, family: 'whatsapp', json: { to: '16505551234', type: 'text', text: { body: 'x' } }, accept: (_v): _v is unknown => true, signal }));
    assert.equal(bad.code, 'whatsapp_100');
    assert.equal(bad.retryable, false);
    const extra = await rejects(graph.call({ method: 'POST', path: `/${WA.phoneNumberId}/messages`, token: WA.accessToken, family: 'whatsapp', json: { messaging_product: 'whatsapp', to: '16505551234', type: 'text', text: { body: 'x', bold: true } }, accept: (_v): _v is unknown => true, signal }));
    assert.equal(extra.code, 'whatsapp_100');
    const token = await rejects(whatsapp.send({ kind: 'text', text: 'x', recipient: { phone: GUEST } }, { ...WA, accessToken: 'wrong' }, signal));
    assert.equal(token.code, 'whatsapp_190');
    assert.equal(token.details.httpStatus, 401);
    assert.equal(token.authFailed, true);
    assert.equal(token.retryable, false);
  });

  test('a recipient without a phone is refused before any request', async () => {
    await assert.rejects(whatsapp.send({ kind: 'text', text: 'x', recipient: { handle: 'abc' } }, WA, signal), (e) => e instanceof ChannelSendError && e.code === 'recipient_missing');
    assert.equal(fake.requests.length, 0);
  });

  test('template list: every page, readiness from the status', async () => {
    const templates = Array.from({ length: 230 }, (_, i) => ({ name: `t${i}`, language: i % 2 ? 'es_MX' : 'en_US', status: i % 3 ? 'APPROVED' : 'PENDING', category: 'UTILITY' }));
    fake.setTemplates(WA.wabaId, templates);
    const listed = await whatsapp.listTemplates(WA, signal);
    assert.equal(listed.length, 230);
    assert.equal(fake.sent(WA.wabaId, 'message_templates').length, 3);
    assert.deepEqual(listed[0], { templateName: 't0', category: 'utility', locale: 'en_US', status: 'pending', ready: false });
    assert.deepEqual(listed[1], { templateName: 't1', category: 'utility', locale: 'es_MX', status: 'approved', ready: true });
  });
});

describe('Graph errors', () => {
  const send = () => whatsapp.send({ kind: 'text', text: 'x', recipient: { phone: GUEST } }, WA, signal);

  test('throughput and pair-rate limits are retryable', async () => {
    for (const [status, code] of [[429, 130429], [400, 131056], [400, 4], [400, 80007], [400, 613]]) {
      fake.failNext(1, { status, code, message: 'limit' });
      const error = await rejects(send());
      assert.equal(error.code, `whatsapp_${code}`);
      assert.equal(error.retryable, true, String(code));
      assert.equal(error.mayHaveBeenSent, false);
    }
  });

  test('5xx is retryable, even without an envelope', async () => {
    fake.failNext(1, { status: 500, code: 131000, message: 'Something went wrong' });
    const withEnvelope = await rejects(send());
    assert.equal(withEnvelope.code, 'whatsapp_131000');
    assert.equal(withEnvelope.retryable, true);
    fake.failNext(1, { status: 503, rawBody: '<html>unavailable</html>' });
    const bare = await rejects(send());
    assert.equal(bare.code, 'provider_http_503');
    assert.equal(bare.retryable, true);
  });

  test('131047 is final and closes the window', async () => {
    fake.failNext(1, { status: 400, code: 131047, message: 'Re-engagement message' });
    const error = await rejects(send());
    assert.equal(error.code, 'whatsapp_131047');
    assert.equal(error.retryable, false);
    assert.equal(error.closesWindow, true);
  });

  test('a 2xx with an unusable body is never retried: the message may be out', async () => {
    fake.failNext(1, { status: 200, rawBody: 'not json' });
    const error = await rejects(send());
    assert.equal(error.code, 'provider_bad_response');
    assert.equal(error.retryable, false);
    assert.equal(error.mayHaveBeenSent, true);
  });

  test('a slow answer times out: retryable, and possibly sent', async () => {
    fake.setDelay(1500);
    const error = await rejects(send());
    fake.setDelay(0);
    assert.equal(error.code, 'provider_timeout');
    assert.equal(error.retryable, true);
    assert.equal(error.mayHaveBeenSent, true);
  });

  test('a refused connection is retryable and certainly not sent', async () => {
    const dead = new WhatsAppCloudProvider(new GraphClient({ baseUrl: 'http://127.0.0.1:1', timeoutMs: 1000 }));
    const error = await rejects(dead.send({ kind: 'text', text: 'x', recipient: { phone: GUEST } }, WA, signal));
    assert.equal(error.code, 'provider_unreachable');
    assert.equal(error.retryable, true);
    assert.equal(error.mayHaveBeenSent, false);
  });

  test('Messenger errors are meta_<code>; the window subcode closes the window', async () => {
    fake.failNext(1, { status: 400, code: 10, subcode: 2018278, message: 'outside of allowed window' });
    const error = await rejects(messenger.send({ kind: 'text', text: 'x', recipient: { handle: PSID } }, PAGE, signal));
    assert.equal(error.code, 'meta_10');
    assert.equal(error.closesWindow, true);
    assert.equal(error.retryable, false);
    assert.equal(error.authFailed, false);
  });
});

describe('media download', () => {
  const jpeg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(2048, 7)]);

  async function drain(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(Buffer.from(chunk));
    return Buffer.concat(chunks);
  }

  test('GET /{media-id}, then the URL with the bearer token, streamed', async () => {
    fake.addMedia({ mediaId: '555001', bytes: jpeg, mimeType: 'image/jpeg', token: WA.accessToken });
    const download = await whatsapp.downloadMedia('555001', WA, { maxBytes: 10_000, expectedContentType: 'image/jpeg', signal });
    assert.equal(download.contentType, 'image/jpeg');
    assert.equal(download.sizeBytes, jpeg.length);
    assert.deepEqual(await drain(download.body), jpeg);
    const [info, bytes] = fake.requests;
    assert.equal(info.path, '/v23.0/555001');
    assert.equal(info.query.phone_number_id, WA.phoneNumberId);
    assert.equal(bytes.headers.authorization, 'Bearer wa-token');
  });

  test('larger than the cap: too_large before the body is read', async () => {
    fake.addMedia({ mediaId: '555002', bytes: jpeg, mimeType: 'image/jpeg', token: WA.accessToken });
    await assert.rejects(whatsapp.downloadMedia('555002', WA, { maxBytes: 100, signal }), (e) => e instanceof MediaDownloadError && e.reason === 'too_large' && !e.retryable);
  });

  test('a type other than announced, or an error page, is content_type', async () => {
    fake.addMedia({ mediaId: '555003', bytes: jpeg, mimeType: 'image/jpeg', token: WA.accessToken });
    await assert.rejects(whatsapp.downloadMedia('555003', WA, { maxBytes: 10_000, expectedContentType: 'application/pdf', signal }), (e) => e instanceof MediaDownloadError && e.reason === 'content_type');
    fake.addMedia({ mediaId: '555004', bytes: Buffer.from('<html>expired</html>'), mimeType: 'text/html', token: WA.accessToken });
    await assert.rejects(whatsapp.downloadMedia('555004', WA, { maxBytes: 10_000, signal }), (e) => e instanceof MediaDownloadError && e.reason === 'content_type');
  });

  test('a dead media URL is not_found; an unknown media id a Graph error', async () => {
    await assert.rejects(graph.download(`${fake.baseUrl}/whatsapp_business/attachments/404404`, { token: WA.accessToken, maxBytes: 10, signal }), (e) => e instanceof MediaDownloadError && e.reason === 'not_found');
    const error = await rejects(whatsapp.downloadMedia('999999', WA, { maxBytes: 10, signal }));
    assert.equal(error.code, 'whatsapp_100');
  });

  test('without the bearer token the media URL refuses', async () => {
    fake.addMedia({ mediaId: '555005', bytes: jpeg, mimeType: 'image/jpeg', token: WA.accessToken });
    await assert.rejects(graph.download(`${fake.baseUrl}/whatsapp_business/attachments/555005`, { maxBytes: 10_000, signal }), (e) => e instanceof MediaDownloadError && e.reason === 'http_error');
  });
});

describe('Messenger and Instagram Send API', () => {
  test('text with messaging_type RESPONSE, a message id back', async () => {
    const result = await messenger.send({ kind: 'text', text: 'Hello 👋', recipient: { handle: PSID } }, PAGE, signal);
    assert.match(result.providerMessageId ?? '', /^m_/);
    const [request] = fake.sent(PAGE.pageId, 'messages');
    assert.equal(request.headers.authorization, 'Bearer page-token');
    assert.deepEqual(request.json, { recipient: { id: PSID }, messaging_type: 'RESPONSE', message: { text: 'Hello 👋' } });
  });

  test('attachment upload then send by id; the caption follows as text', async () => {
    const { providerMediaId } = await messenger.upload({ mediaKind: 'image', contentType: 'image/png', filename: 'map.png', bytes: Buffer.from('png') }, PAGE, signal);
    assert.deepEqual(fake.sent(PAGE.pageId, 'message_attachments')[0].form, {
      message: JSON.stringify({ attachment: { type: 'image', payload: { is_reusable: true } } }),
      filedata: { filename: 'map.png', type: 'image/png', size: 3 },
    });
    const result = await messenger.send({ kind: 'media', mediaKind: 'image', providerMediaId, caption: 'How to find us', recipient: { handle: PSID } }, PAGE, signal);
    assert.equal(result.additionalProviderMessageIds?.length, 1);
    const bodies = fake.sent(PAGE.pageId, 'messages').map((r) => r.json);
    assert.deepEqual(bodies, [
      { recipient: { id: PSID }, messaging_type: 'RESPONSE', message: { attachment: { type: 'image', payload: { attachment_id: providerMediaId } } } },
      { recipient: { id: PSID }, messaging_type: 'RESPONSE', message: { text: 'How to find us' } },
    ]);
  });

  test('reactions, mark_seen and typing_on are sender actions alone', async () => {
    assert.deepEqual(await messenger.send({ kind: 'reaction', targetProviderMessageId: 'm_IN', emoji: '😊', recipient: { handle: PSID } }, PAGE, signal), {});
    await messenger.send({ kind: 'reaction', targetProviderMessageId: 'm_IN', emoji: '', recipient: { handle: PSID } }, PAGE, signal);
    await messenger.send({ kind: 'read_receipt', providerMessageId: 'm_IN', typingIndicator: true, recipient: { handle: PSID } }, PAGE, signal);
    await messenger.send({ kind: 'typing', recipient: { handle: PSID } }, PAGE, signal);
    assert.deepEqual(
      fake.sent(PAGE.pageId, 'messages').map((r) => r.json),
      [
        { recipient: { id: PSID }, sender_action: 'react', payload: { message_id: 'm_IN', reaction: '😊' } },
        { recipient: { id: PSID }, sender_action: 'unreact', payload: { message_id: 'm_IN' } },
        { recipient: { id: PSID }, sender_action: 'mark_seen' },
        { recipient: { id: PSID }, sender_action: 'typing_on' },
        { recipient: { id: PSID }, sender_action: 'typing_on' },
      ],
    );
  });

  test('templates are refused up front', async () => {
    await assert.rejects(messenger.send({ kind: 'template', name: 't', locale: 'en_US', bodyParameters: [], recipient: { handle: PSID } }, PAGE, signal), (e) => e instanceof ChannelSendError && e.code === 'unsupported_request');
    assert.equal(fake.requests.length, 0);
  });

  test('Instagram: its account id, its token, platform=instagram on upload', async () => {
    await instagram.send({ kind: 'text', text: 'Hi', recipient: { handle: '6120937452291847' } }, IG, signal);
    assert.equal(fake.sent(IG.instagramAccountId, 'messages')[0].headers.authorization, 'Bearer ig-token');
    await instagram.upload({ mediaKind: 'video', contentType: 'video/mp4', filename: 'tour.mp4', bytes: Buffer.from('mp4') }, IG, signal);
    assert.equal(fake.sent(IG.instagramAccountId, 'message_attachments')[0].form?.platform, 'instagram');
  });

  test('profile names: name for Messenger, name or username for Instagram', async () => {
    fake.setProfile(PSID, { name: 'Ana López' });
    fake.setProfile('6120937452291847', { username: 'ana.travels' });
    assert.equal(await messenger.profileName(PSID, PAGE, signal), 'Ana López');
    assert.equal(fake.requests.at(-1)?.query.fields, 'name');
    assert.equal(await instagram.profileName('6120937452291847', IG, signal), 'ana.travels');
    assert.equal(fake.requests.at(-1)?.query.fields, 'name,username');
  });
});

describe('edges', () => {
  test('media without Content-Length is cut off mid-stream at the cap', async () => {
    const { createServer } = await import('node:http');
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'video/mp4' });
      for (let i = 0; i < 20; i++) res.write(Buffer.alloc(1024, i));
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const download = await graph.download(`http://127.0.0.1:${port}/video`, { maxBytes: 5000, expectedContentType: 'video/mp4', signal });
      assert.equal(download.sizeBytes, undefined);
      await assert.rejects(
        (async () => {
          for await (const chunk of download.body) assert.ok(chunk);
        })(),
        (e) => e instanceof MediaDownloadError && e.reason === 'too_large',
      );
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  test("the caller's abort is provider_aborted, possibly sent", async () => {
    fake.setDelay(300);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const error = await rejects(whatsapp.send({ kind: 'text', text: 'x', recipient: { phone: GUEST } }, WA, controller.signal));
    fake.setDelay(0);
    assert.equal(error.code, 'provider_aborted');
    assert.equal(error.mayHaveBeenSent, true);
  });
});
