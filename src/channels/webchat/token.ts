import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Webchat session tokens (decisions 7.3): `wcs1.<payload>.<mac>`, the payload `{w: widgetId, v: visitorId}` in
 * base64url JSON, the MAC an HMAC-SHA256 with a key derived from SECRET_KEY's signing key for this purpose only.
 * A token names its widget, so it is refused on any other; expiry is by idleness, kept in the session row.
 */
const PREFIX = 'wcs1';

export interface SessionClaims {
  widgetId: string;
  visitorId: string;
}

export function webchatTokenKey(signingKey: Buffer): Buffer {
  return createHmac('sha256', signingKey).update('m2m:webchat-session').digest();
}

function mac(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(`${PREFIX}.${payload}`).digest();
}

export function signSessionToken(key: Buffer, claims: SessionClaims): string {
  const payload = Buffer.from(JSON.stringify({ w: claims.widgetId, v: claims.visitorId })).toString('base64url');
  return `${PREFIX}.${payload}.${mac(key, payload).toString('base64url')}`;
}

/** The claims of a well-formed token with a valid MAC; undefined for anything else. */
export function verifySessionToken(key: Buffer, token: string): SessionClaims | undefined {
  if (token.length > 512) return undefined;
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX) return undefined;
  const [, payload, given] = parts;
  const expected = mac(key, payload);
  const actual = Buffer.from(given, 'base64url');
  if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    const { w, v } = parsed as Record<string, unknown>;
    return typeof w === 'string' && typeof v === 'string' ? { widgetId: w, visitorId: v } : undefined;
  } catch {
    return undefined;
  }
}
