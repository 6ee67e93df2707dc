/**
 * Webhook signatures: `X-Service-Signature: t=<unix seconds>,v1=<hex>` where
 * v1 = lowercase hex HMAC-SHA256(key = secret as UTF-8 bytes, message = `${t}.` + raw body bytes).
 *
 * The scheme is the one Stripe uses for `Stripe-Signature`, so the two interoperate.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header carrying the signature on each delivery (lower-case, as Node's `req.headers` keys are). */
export const SIGNATURE_HEADER = 'x-service-signature';
/** Header carrying the event id on each delivery. */
export const EVENT_ID_HEADER = 'x-service-event-id';
/** Default accepted distance between the signed timestamp and now: five minutes. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type WebhookVerificationFailureReason =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_out_of_tolerance'
  | 'signature_mismatch'
  | 'invalid_json';

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  readonly reason: WebhookVerificationFailureReason;
  constructor(reason: WebhookVerificationFailureReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** The envelope every event shares. `data` depends on `type`. */
export interface WebhookEvent<TData = Record<string, unknown>> {
  eventId: string;
  type: string;
  /** Currently the string `"1.0"`. */
  schemaVersion: string;
  tenantId: string;
  /** ISO 8601 timestamp. */
  occurredAt: string;
  data: TData;
}

export interface VerifyOptions {
  /** Maximum distance in seconds between the signed timestamp and now, past or future (default 300). */
  toleranceSeconds?: number;
  /** Current time in unix seconds (default `Date.now() / 1000`). */
  now?: () => number;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/i;
const UNIX_SECONDS = /^\d{1,15}$/;

/** Raw bytes of the body without any lossy conversion: a Uint8Array is used as-is (no copy). */
function bodyBytes(rawBody: string | Uint8Array): Buffer {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  throw new TypeError('rawBody must be a string or a Uint8Array (the exact bytes received)');
}

function checkSecret(secret: string): void {
  if (typeof secret !== 'string' || secret === '') throw new TypeError('secret must be a non-empty string');
}

function hmac(secret: string, timestamp: number, body: Buffer): Buffer {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${timestamp}.`, 'utf8').update(body).digest();
}

/**
 * Computes the signature header value `t=<timestampSeconds>,v1=<hex>` for a body.
 * Useful in tests of a receiver.
 */
export function signWebhook(secret: string, timestampSeconds: number, rawBody: string | Uint8Array): string {
  checkSecret(secret);
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new TypeError('timestampSeconds must be a non-negative integer (unix seconds)');
  }
  return `t=${timestampSeconds},v1=${hmac(secret, timestampSeconds, bodyBytes(rawBody)).toString('hex')}`;
}

interface ParsedHeader {
  timestamp: number;
  signatures: Buffer[];
}

function parseHeader(header: string): ParsedHeader {
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) throw new WebhookVerificationError('malformed_header', 'Signature header has an item without "key=value"');
    const key = item.slice(0, eq).trim();
    const value = item.slice(eq + 1).trim();
    if (key === 't') {
      if (timestamp !== undefined) throw new WebhookVerificationError('malformed_header', 'Signature header has more than one timestamp');
      if (!UNIX_SECONDS.test(value)) throw new WebhookVerificationError('malformed_header', 'Signature header timestamp is not unix seconds');
      timestamp = Number(value);
    } else if (key === 'v1') {
      // A v1 value that is not 64 hex characters cannot match; skip it rather than fail, as other
      // v1 entries (e.g. during a secret rotation) may still be valid.
      if (HEX_SHA256.test(value)) signatures.push(Buffer.from(value, 'hex'));
    }
    // Other schemes (v0, v2, …) are ignored for forward compatibility.
  }
  if (timestamp === undefined) throw new WebhookVerificationError('malformed_header', 'Signature header has no timestamp (t=)');
  if (signatures.length === 0) {
    throw new WebhookVerificationError('malformed_header', 'Signature header has no well-formed v1 signature');
  }
  return { timestamp, signatures };
}

/**
 * Checks the signature and the timestamp of a delivery without parsing the body.
 * Returns the signed timestamp. Throws `WebhookVerificationError` on failure.
 */
export function verifyWebhookSignature(
  rawBody: string | Uint8Array,
  signatureHeader: string | undefined,
  secret: string,
  opts: VerifyOptions = {},
): { timestamp: number } {
  checkSecret(secret);
  const body = bodyBytes(rawBody);
  const tolerance = opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (!Number.isFinite(tolerance) || tolerance < 0) throw new TypeError('toleranceSeconds must be a non-negative number');

  if (signatureHeader === undefined || signatureHeader === null) {
    throw new WebhookVerificationError('missing_header', `Missing ${SIGNATURE_HEADER} header`);
  }
  if (typeof signatureHeader !== 'string') {
    // e.g. an array from a framework that kept repeated headers apart
    throw new WebhookVerificationError('malformed_header', `${SIGNATURE_HEADER} header must be a single string`);
  }
  if (signatureHeader.trim() === '') {
    throw new WebhookVerificationError('missing_header', `Empty ${SIGNATURE_HEADER} header`);
  }
  const { timestamp, signatures } = parseHeader(signatureHeader);

  const expected = hmac(secret, timestamp, body);
  let matched = false;
  for (const candidate of signatures) {
    // Every candidate is 32 bytes (checked by the parser), like the expected digest.
    if (timingSafeEqual(candidate, expected)) matched = true; // no early exit: same work for every entry
  }
  if (!matched) throw new WebhookVerificationError('signature_mismatch', 'No signature matches the expected signature for this body');

  const now = opts.now ? opts.now() : Date.now() / 1000;
  if (Math.abs(now - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      'timestamp_out_of_tolerance',
      `Signature timestamp is more than ${tolerance} s away from now`,
    );
  }
  return { timestamp };
}

/**
 * Verifies a delivery and returns its event envelope.
 *
 * Pass the exact bytes received (a Buffer/Uint8Array straight from the request, or the body string
 * if your framework kept it verbatim): never a re-serialised `JSON.stringify(req.body)`.
 * JSON is parsed only after the signature and the timestamp check out. The envelope's fields are
 * not validated beyond being a JSON object: the payload is authenticated as the server's.
 */
export function verifyWebhook<TData = Record<string, unknown>>(
  rawBody: string | Uint8Array,
  signatureHeader: string | undefined,
  secret: string,
  opts: VerifyOptions = {},
): WebhookEvent<TData> {
  verifyWebhookSignature(rawBody, signatureHeader, secret, opts);
  let parsed: unknown;
  try {
    const text = typeof rawBody === 'string' ? rawBody : new TextDecoder('utf-8', { fatal: true }).decode(rawBody);
    parsed = JSON.parse(text);
  } catch {
    throw new WebhookVerificationError('invalid_json', 'Webhook body is not valid UTF-8 JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new WebhookVerificationError('invalid_json', 'Webhook body is not a JSON object');
  }
  return parsed as WebhookEvent<TData>;
}
