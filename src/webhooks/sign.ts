import { createHmac, randomBytes } from 'node:crypto';

/** A new signing secret: `whsec_` and 192 random bits. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64url')}`;
}

/** `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, the X-Service-Signature header. */
export function signatureHeader(secret: string, timestampSeconds: number, body: string | Buffer): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(`${timestampSeconds}.`)
    .update(body)
    .digest('hex');
  return `t=${timestampSeconds},v1=${mac}`;
}
