import { test } from 'node:test';
import assert from 'node:assert/strict';
import { signMetaPayload, verifyMetaSignature } from '../../src/channels/providers/meta/signature.js';

const SECRET = 'test-app-secret';
// Meta escapes non-ASCII as \uXXXX: the signature covers those exact bytes, never a re-serialization.
const RAW = Buffer.from('{"object":"page","entry":[{"id":"1","messaging":[{"message":{"text":"caf\\u00e9 \\ud83d\\ude00"}}]}]}');

test('a signature made with the app secret over the raw bytes verifies', () => {
  assert.equal(verifyMetaSignature(SECRET, RAW, signMetaPayload(SECRET, RAW)), true);
});

test('a wrong secret, changed bytes, or a re-serialized body fail', () => {
  const header = signMetaPayload(SECRET, RAW);
  assert.equal(verifyMetaSignature('other-secret', RAW, header), false);
  assert.equal(verifyMetaSignature(SECRET, Buffer.concat([RAW, Buffer.from(' ')]), header), false);
  const reserialized = Buffer.from(JSON.stringify(JSON.parse(RAW.toString('utf8'))));
  assert.notDeepEqual(reserialized, RAW);
  assert.equal(verifyMetaSignature(SECRET, reserialized, header), false);
});

test('missing, malformed or repeated headers fail without throwing', () => {
  const good = signMetaPayload(SECRET, RAW);
  for (const header of [undefined, '', 'sha256=', 'sha1=abc', good.slice(0, -2), `${good}00`, good.replace('sha256=', 'SHA256='), 'sha256=' + 'z'.repeat(64), [good]]) {
    assert.equal(verifyMetaSignature(SECRET, RAW, header), false, String(header));
  }
  assert.equal(verifyMetaSignature('', RAW, signMetaPayload('', RAW)), false, 'an empty app secret never verifies');
});

test('upper-case hex is the same signature', () => {
  const good = signMetaPayload(SECRET, RAW);
  assert.equal(verifyMetaSignature(SECRET, RAW, 'sha256=' + good.slice(7).toUpperCase()), true);
});

test('postCallback signs a documented fixture over the bytes it sends', async () => {
  const { startReceiver } = await import('../helpers/receiver.js');
  const { metaFixture, postCallback } = await import('../helpers/meta-callbacks.js');
  const receiver = await startReceiver();
  try {
    const answer = await postCallback(receiver.url, metaFixture('wa-text'), SECRET);
    assert.equal(answer.status, 200);
    const [received] = receiver.received;
    assert.equal(verifyMetaSignature(SECRET, Buffer.from(received.body), received.headers['x-hub-signature-256']), true);
  } finally {
    await receiver.close();
  }
});
