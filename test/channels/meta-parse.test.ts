import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { parseMetaCallback } from '../../src/channels/providers/meta/parse.js';
import type { InboundEvent, InboundMessageEvent } from '../../src/channels/providers/types.js';
import { mergeEntries, metaFixture, whatsappTextMessage } from '../helpers/meta-callbacks.js';

// Every documented callback example (test/fixtures/meta) parses to the neutral events the shared code expects.

const PNID = '106540352242922';
const GUEST = '+16505551234';
const CTX = 'wamid.HBgLMTQxMjU1NTA4MjkVAgASGBQzQUNCNjk5RDUwNUZGMUZEM0VBRAA=';
const PAGE = '682498302938465';
const PSID = '5528374916283745';
const IG = '17841405822304914';
const IGSID = '6120937452291847';

function parse(name: string) {
  const result = parseMetaCallback(metaFixture(name));
  assert.ok(result.ok, `${name} parses`);
  return result;
}

function only(name: string): InboundEvent {
  const { events, skipped } = parse(name);
  assert.equal(skipped, 0, `${name}: nothing skipped`);
  assert.equal(events.length, 1, `${name}: one event`);
  return events[0];
}

function message(name: string): InboundMessageEvent {
  const event = only(name);
  assert.equal(event.kind, 'message');
  return event;
}

const WA_BASE = { kind: 'message', provider: 'whatsapp_cloud', channelRef: PNID, sender: { phone: GUEST, profileName: 'Sheena Nelson' }, timestamp: new Date(1739321024_000) };

describe('WhatsApp messages', () => {
  test('text, with the provider timestamp and the E.164 sender', () => {
    assert.deepEqual(message('wa-text'), { ...WA_BASE, providerMessageId: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=', type: 'text', text: 'Hi, is breakfast included?' });
  });

  test('context.id is the reply reference', () => {
    assert.equal(message('wa-text-reply').replyToProviderMessageId, CTX);
  });

  test('image, audio, video, document and sticker keep their media id, type, filename and caption', () => {
    assert.deepEqual(message('wa-image'), {
      ...WA_BASE,
      providerMessageId: 'wamid.IMAGE0001',
      type: 'image',
      text: 'Our room view',
      media: { providerMediaId: '1003383421387256', contentType: 'image/jpeg', sha256: '81d3bd8a8db4868c9520ed47186e8b7c5789e61ff79f7f834be6950b808a90d3' },
    });
    const audio = message('wa-audio');
    assert.equal(audio.type, 'audio');
    assert.deepEqual(audio.media, { providerMediaId: '1003383421387257', contentType: 'audio/ogg; codecs=opus', sha256: '5e4b4b4fbc5c1b2a3d0bf8f9a41c7f8e2d4c0b8a7f6e5d4c3b2a190817263544', voice: true });
    assert.equal(audio.text, undefined);
    const video = message('wa-video');
    assert.equal(video.type, 'video');
    assert.equal(video.text, 'The pool');
    const document = message('wa-document');
    assert.equal(document.type, 'document');
    assert.equal(document.media?.filename, 'passport.pdf');
    assert.equal(document.media?.contentType, 'application/pdf');
    assert.equal(document.text, 'My passport');
    const sticker = message('wa-sticker');
    assert.equal(sticker.type, 'sticker');
    assert.equal(sticker.media?.contentType, 'image/webp');
  });

  test('location', () => {
    assert.deepEqual(message('wa-location').location, { latitude: 37.483307, longitude: -122.148981, name: 'Philz Coffee', address: '1 Hacker Way, Menlo Park, CA 94025' });
  });

  test('contacts, compact', () => {
    const event = message('wa-contacts');
    assert.equal(event.type, 'contacts');
    assert.deepEqual(event.contacts, [{ name: 'Barbara J. Johnson', phones: ['+1 (650) 555-1234'], emails: ['bjohnson@example.com'], whatsappIds: ['+16505551234'] }]);
  });

  test('interactive button and list replies, and a template quick-reply button, are interactive_reply', () => {
    const button = message('wa-interactive-button-reply');
    assert.equal(button.type, 'interactive_reply');
    assert.deepEqual(button.interactive, { kind: 'button_reply', id: 'cancel-button', title: 'Cancel' });
    assert.equal(button.replyToProviderMessageId, CTX);
    assert.deepEqual(message('wa-interactive-list-reply').interactive, { kind: 'list_reply', id: 'priority_express', title: 'Priority Mail Express' });
    const quick = message('wa-button');
    assert.equal(quick.type, 'interactive_reply');
    assert.deepEqual(quick.interactive, { kind: 'button_reply', id: 'confirm_booking', title: 'Confirm' });
  });

  test('reactions; a removed reaction has an empty emoji', () => {
    assert.deepEqual(message('wa-reaction').reaction, { emoji: '\u{1F44D}', targetProviderMessageId: CTX });
    assert.deepEqual(message('wa-reaction-removed').reaction, { emoji: '', targetProviderMessageId: CTX });
  });

  test('unsupported and unknown types are kept as unsupported, never dropped', () => {
    const unsupported = message('wa-unsupported');
    assert.equal(unsupported.type, 'unsupported');
    assert.equal(unsupported.unsupportedReason, 'poll_update');
    const order = message('wa-unknown-type');
    assert.equal(order.type, 'unsupported');
    assert.equal(order.unsupportedReason, 'order');
    assert.equal(order.providerMessageId, 'wamid.ORDER0001');
  });

  test('a known type whose body is not as documented becomes unsupported', () => {
    const payload = whatsappTextMessage({ phoneNumberId: PNID, from: '16505551234', id: 'wamid.BROKEN', timestamp: 1739321024, text: 'x' });
    const msg = payload.entry[0].changes[0].value.messages[0];
    Reflect.set(msg, 'text', { body: 42 });
    const result = parseMetaCallback(payload);
    assert.ok(result.ok);
    assert.equal(result.events.length, 1);
    assert.ok(result.events[0].kind === 'message' && result.events[0].type === 'unsupported');
  });
});

describe('WhatsApp statuses and errors', () => {
  test('sent, delivered and read', () => {
    for (const status of ['sent', 'delivered', 'read'] as const) {
      assert.deepEqual(only(`wa-status-${status}`), {
        kind: 'status',
        provider: 'whatsapp_cloud',
        channelRef: PNID,
        providerMessageId: CTX,
        status,
        timestamp: new Date(1739321025_000),
        recipient: { phone: GUEST },
        closesWindow: false,
      });
    }
  });

  test('failed maps the error to whatsapp_<code>; 131047 closes the window', () => {
    const event = only('wa-status-failed');
    assert.ok(event.kind === 'status');
    assert.equal(event.status, 'failed');
    assert.equal(event.error?.code, 'whatsapp_131047');
    assert.match(event.error?.message ?? '', /24 hours/);
    assert.equal(event.closesWindow, true);
  });

  test('value-level errors become channel errors', () => {
    assert.deepEqual(only('wa-errors'), {
      kind: 'channel_error',
      provider: 'whatsapp_cloud',
      channelRef: PNID,
      error: { code: 'whatsapp_130429', message: 'Message failed to send because there were too many messages sent from this phone number in a short period of time' },
    });
  });

  test('other fields are counted as skipped', () => {
    const result = parseMetaCallback({ object: 'whatsapp_business_account', entry: [{ id: '1', changes: [{ field: 'message_template_status_update', value: { event: 'APPROVED' } }] }] });
    assert.ok(result.ok);
    assert.deepEqual(result.events, []);
    assert.deepEqual(result.skippedBy, { 'field:message_template_status_update': 1 });
  });
});

describe('Messenger and Instagram', () => {
  const M_BASE = { kind: 'message', provider: 'messenger', channelRef: PAGE, sender: { handle: PSID } };

  test('text, quick reply, reply_to', () => {
    assert.deepEqual(message('messenger-text'), { ...M_BASE, providerMessageId: 'm_1457764197618:41d102a3e1ae206a39', timestamp: new Date(1458692752478), type: 'text', text: 'hello, world!' });
    const quick = message('messenger-text-quick-reply');
    assert.equal(quick.type, 'interactive_reply');
    assert.deepEqual(quick.interactive, { kind: 'button_reply', id: 'BOOK_ROOM', title: 'hello, world!' });
    assert.equal(message('messenger-reply').replyToProviderMessageId, 'm_1fTq8oLumEyIp3Q2MR-aY7IfLZDamVrALniheU');
  });

  test('attachments by URL; file is a document; fallback is unsupported', () => {
    const image = message('messenger-attachment');
    assert.equal(image.type, 'image');
    assert.deepEqual(image.media, { url: 'https://scontent.xx.fbcdn.net/v/t1.15752-9/test-image.jpg' });
    assert.equal(message('messenger-attachment-file').type, 'document');
    const fallback = message('messenger-fallback');
    assert.equal(fallback.type, 'unsupported');
    assert.equal(fallback.unsupportedReason, 'fallback');
  });

  test('a sticker (the `sticker` attachment, or during the transition Meta announced an `image` with a sticker_id) is a sticker; a document keeps the file name of its URL', () => {
    const withBoth = metaFixture('messenger-attachment') as { entry: Array<{ messaging: Array<{ message: { attachments: unknown[] } }> }> };
    withBoth.entry[0].messaging[0].message.attachments = [
      { type: 'image', payload: { url: 'https://scontent.xx.fbcdn.net/v/sticker.png', sticker_id: 369239263222822 } },
      { type: 'sticker', payload: { url: 'https://scontent.xx.fbcdn.net/v/sticker.png', sticker_id: 369239263222822 } },
    ];
    const result = parseMetaCallback(withBoth);
    assert.ok(result.ok && result.events[0].kind === 'message');
    assert.equal(result.events[0].type, 'sticker');
    assert.deepEqual(result.events[0].media, { url: 'https://scontent.xx.fbcdn.net/v/sticker.png' });
    assert.deepEqual(message('messenger-attachment-file').media, { url: 'https://cdn.fbsbx.com/v/t59.2708-21/test-booking.pdf', filename: 'test-booking.pdf' });
  });

  test('postbacks are interactive replies', () => {
    const postback = message('messenger-postback');
    assert.equal(postback.type, 'interactive_reply');
    assert.equal(postback.providerMessageId, 'm_MESSAGE-ID-POSTBACK');
    assert.deepEqual(postback.interactive, { kind: 'button_reply', id: 'CHECK_AVAILABILITY', title: 'Check availability' });
  });

  test('reactions and unreactions', () => {
    const reaction = message('messenger-reaction');
    assert.equal(reaction.type, 'reaction');
    assert.deepEqual(reaction.reaction, { emoji: '\u2764\ufe0f', targetProviderMessageId: 'm_1457764197618:41d102a3e1ae206a38' });
    assert.equal(message('messenger-unreact').reaction?.emoji, '');
  });

  test('delivery and read watermarks', () => {
    assert.deepEqual(only('messenger-delivery'), {
      kind: 'watermark',
      provider: 'messenger',
      channelRef: PAGE,
      contact: { handle: PSID },
      status: 'delivered',
      providerMessageIds: ['mid.1458668856218:ed81099e15d3f4f233'],
      watermark: new Date(1458668856253),
      timestamp: new Date(1458692752478),
    });
    const read = only('messenger-read');
    assert.ok(read.kind === 'watermark');
    assert.equal(read.status, 'read');
    assert.deepEqual(read.watermark, new Date(1458668856253));
  });

  test('echoes: the page is the sender, the guest the recipient, the app id kept', () => {
    const echo = message('messenger-echo');
    assert.equal(echo.channelRef, PAGE);
    assert.deepEqual(echo.sender, { handle: PAGE });
    assert.deepEqual(echo.echo, { recipient: { handle: PSID }, appId: '1517776481860111' });
    assert.equal(echo.text, 'We will see you at 3pm');
  });

  test('Instagram: messages, attachments, echoes, reactions, seen and postbacks', () => {
    const text = message('instagram-text');
    assert.equal(text.provider, 'instagram');
    assert.equal(text.channelRef, IG);
    assert.deepEqual(text.sender, { handle: IGSID });
    assert.equal(message('instagram-attachment').type, 'video');
    const echo = message('instagram-echo');
    assert.deepEqual(echo.echo, { recipient: { handle: IGSID } });
    assert.equal(message('instagram-reaction').type, 'reaction');
    const seen = only('instagram-seen');
    assert.ok(seen.kind === 'watermark');
    assert.deepEqual(seen.providerMessageIds, ['aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDA1ODIyMzA0OTE2']);
    assert.equal(message('instagram-postback').type, 'interactive_reply');
  });
});

describe('bad input', () => {
  test('an unknown object or a malformed envelope is refused whole', () => {
    assert.deepEqual(parseMetaCallback({ object: 'user', entry: [] }), { ok: false, reason: 'unknown_object' });
    assert.deepEqual(parseMetaCallback(null), { ok: false, reason: 'unknown_object' });
    assert.deepEqual(parseMetaCallback('text'), { ok: false, reason: 'unknown_object' });
    assert.deepEqual(parseMetaCallback({ object: 'whatsapp_business_account' }), { ok: false, reason: 'malformed_envelope' });
    assert.deepEqual(parseMetaCallback({ object: 'whatsapp_business_account', entry: [{ id: '1', changes: 'x' }] }), { ok: false, reason: 'malformed_envelope' });
    assert.deepEqual(parseMetaCallback({ object: 'page', entry: {} }), { ok: false, reason: 'malformed_envelope' });
  });

  test('odd items inside a valid envelope are counted, the rest parsed', () => {
    const good = whatsappTextMessage({ phoneNumberId: PNID, from: '16505551234', id: 'wamid.GOOD', timestamp: 1739321024, text: 'ok' });
    const value = good.entry[0].changes[0].value;
    Reflect.set(value, 'messages', [...value.messages, { id: 'no-sender' }]);
    Reflect.set(value, 'statuses', [{ id: 'x', status: 'deleted', timestamp: '1' }, { nonsense: true }]);
    const result = parseMetaCallback(good);
    assert.ok(result.ok);
    assert.equal(result.events.length, 1);
    assert.deepEqual(result.skippedBy, { invalid_message: 1, 'status:deleted': 1, invalid_status: 1 });
    assert.equal(result.skipped, 3);
  });

  test('emoji and astral characters pass through intact', () => {
    const text = 'Hola 👋🏽 𝒳 — 家族 ❤️';
    const result = parseMetaCallback(whatsappTextMessage({ phoneNumberId: PNID, from: '16505551234', id: 'wamid.EMOJI', timestamp: 1739321024, text }));
    assert.ok(result.ok && result.events[0].kind === 'message');
    assert.equal(result.events[0].text, text);
  });
});

test('5,000 entries parse in one pass', () => {
  const payloads = Array.from({ length: 5000 }, (_, i) =>
    whatsappTextMessage({ phoneNumberId: `1065${String(i % 50).padStart(8, '0')}`, from: `1650555${String(i).padStart(4, '0')}`, id: `wamid.BULK${i}`, timestamp: 1739321024 + i, text: `message ${i}` }),
  );
  const payload = mergeEntries(payloads);
  const result = parseMetaCallback(payload);
  assert.ok(result.ok);
  assert.equal(result.events.length, 5000);
  assert.equal(result.skipped, 0);
  assert.equal(new Set(result.events.map((e) => (e.kind === 'message' ? e.providerMessageId : ''))).size, 5000);
});
