import { createHmac, timingSafeEqual } from 'node:crypto';

const PREFIX = 'sha256=';
const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;

/** `sha256=<hex HMAC-SHA256 of the raw body keyed with the app secret>`, as Meta signs every callback. */
export function signMetaPayload(appSecret: string, rawBody: Uint8Array | string): string {
  return PREFIX + createHmac('sha256', appSecret).update(rawBody).digest('hex');
}

/**
 * Checks `X-Hub-Signature-256` over the exact bytes received: the body must not have been parsed and
 * re-serialized first (Meta escapes non-ASCII characters as `\uXXXX`, a re-serialization would not).
 * The comparison is timing-safe; a missing, malformed or wrong header is `false`.
 */
export function verifyMetaSignature(appSecret: string, rawBody: Uint8Array, header: string | string[] | undefined): boolean {
  if (!appSecret || typeof header !== 'string' || !header.startsWith(PREFIX)) return false;
  const givenHex = header.slice(PREFIX.length);
  if (!HEX_SHA256.test(givenHex)) return false;
  const expected = createHmac('sha256', appSecret).update(rawBody).digest();
  const given = Buffer.from(givenHex, 'hex');
  return given.length === expected.length && timingSafeEqual(expected, given);
}
