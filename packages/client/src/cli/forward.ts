import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { EventEnvelope } from '../generated.js';
import { EVENT_ID_HEADER, SIGNATURE_HEADER, signWebhook } from '../verify.js';

/** The server's delivery User-Agent (src/webhooks/deliver.ts), so a receiver sees what production sends. */
export const DELIVERY_USER_AGENT = 'M2M-Webhooks/1.0 (tenant-scoped messaging API)';
/** A delivery attempt's default deadline on the server (WEBHOOK_ATTEMPT_TIMEOUT_MS). */
const ATTEMPT_TIMEOUT_MS = 10_000;

export type ForwardResult = { status: number; durationMs: number } | { status: null; error: string; durationMs: number };

/**
 * POSTs one event to a local receiver exactly as a webhook delivery: the envelope as the JSON body, the event id
 * and a `t=…,v1=…` signature over the raw body, the same content type and User-Agent, and no other header
 * (node:http rather than fetch, which adds its own Accept and Sec-Fetch headers).
 */
export function forwardEvent(url: string, event: EventEnvelope, secret: string): Promise<ForwardResult> {
  const body = JSON.stringify(event);
  const target = new URL(url);
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const outgoing = send(
      target,
      {
        method: 'POST',
        timeout: ATTEMPT_TIMEOUT_MS,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': DELIVERY_USER_AGENT,
          [EVENT_ID_HEADER]: event.eventId,
          [SIGNATURE_HEADER]: signWebhook(secret, Math.floor(Date.now() / 1000), body),
        },
      },
      (response) => {
        response.resume();
        response.once('end', () => resolve({ status: response.statusCode ?? 0, durationMs: elapsed() }));
        response.once('error', (error) => resolve({ status: null, error: error.message, durationMs: elapsed() }));
      },
    );
    outgoing.once('timeout', () => outgoing.destroy(new Error(`no answer within ${ATTEMPT_TIMEOUT_MS} ms`)));
    outgoing.once('error', (error) => resolve({ status: null, error: error.message, durationMs: elapsed() }));
    outgoing.end(body);
  });
}
