import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { signMetaPayload } from '../../src/channels/providers/meta/signature.js';

// Signed Meta callbacks built from Meta's documented examples (test/fixtures/meta), with the ids a test needs.

const FIXTURES = fileURLToPath(new URL('../fixtures/meta/', import.meta.url));

/** A documented callback example, parsed afresh (callers may change it). */
export function metaFixture(name: string): unknown {
  return JSON.parse(readFileSync(`${FIXTURES}${name}.json`, 'utf8'));
}

export interface WhatsAppIds {
  phoneNumberId: string;
  wabaId?: string;
  displayPhoneNumber?: string;
}

export interface WhatsAppInbound extends WhatsAppIds {
  /** The guest's wa_id (digits, no '+'). */
  from: string;
  id: string;
  /** Unix seconds. */
  timestamp: number;
  profileName?: string;
  replyTo?: string;
}

function whatsappEnvelope<V extends Record<string, unknown>>(ids: WhatsAppIds, value: V) {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: ids.wabaId ?? '102290129340398',
        changes: [
          {
            value: { messaging_product: 'whatsapp', metadata: { display_phone_number: ids.displayPhoneNumber ?? '15550783881', phone_number_id: ids.phoneNumberId }, ...value },
            field: 'messages',
          },
        ],
      },
    ],
  };
}

/** A guest message of any type: `body` is the type's own object (`{text: {body}}`, `{image: {...}}`, …). */
export function whatsappMessage(input: WhatsAppInbound & { type: string; body: Record<string, unknown> }) {
  return whatsappEnvelope(input, {
    contacts: [{ profile: { name: input.profileName ?? 'Sheena Nelson' }, wa_id: input.from }],
    messages: [
      {
        ...(input.replyTo ? { context: { from: input.displayPhoneNumber ?? '15550783881', id: input.replyTo } } : {}),
        from: input.from,
        id: input.id,
        timestamp: String(input.timestamp),
        type: input.type,
        ...input.body,
      },
    ],
  });
}

export function whatsappTextMessage(input: WhatsAppInbound & { text: string }) {
  return whatsappMessage({ ...input, type: 'text', body: { text: { body: input.text } } });
}

export function whatsappImageMessage(input: WhatsAppInbound & { mediaId: string; mimeType?: string; caption?: string; sha256?: string }) {
  const image = { mime_type: input.mimeType ?? 'image/jpeg', sha256: input.sha256 ?? '0'.repeat(64), id: input.mediaId, ...(input.caption ? { caption: input.caption } : {}) };
  return whatsappMessage({ ...input, type: 'image', body: { image } });
}

export function whatsappReaction(input: WhatsAppInbound & { targetId: string; emoji?: string }) {
  return whatsappMessage({ ...input, type: 'reaction', body: { reaction: { message_id: input.targetId, ...(input.emoji ? { emoji: input.emoji } : {}) } } });
}

/** `statuses[]` for one outbound message; `errorCode` makes it a failure with Meta's error object. */
export function whatsappStatus(input: WhatsAppIds & { id: string; status: 'sent' | 'delivered' | 'read' | 'failed'; recipient: string; timestamp: number; errorCode?: number; errorTitle?: string }) {
  const errors =
    input.errorCode !== undefined
      ? { errors: [{ code: input.errorCode, title: input.errorTitle ?? 'Failed', message: input.errorTitle ?? 'Failed', error_data: { details: input.errorTitle ?? 'Failed' } }] }
      : {};
  return whatsappEnvelope(input, { statuses: [{ id: input.id, status: input.status, timestamp: String(input.timestamp), recipient_id: input.recipient, ...errors }] });
}

export interface MessagingInbound {
  object?: 'page' | 'instagram';
  /** Page id or Instagram account id. */
  accountId: string;
  /** The guest's page-scoped id. */
  from: string;
  mid: string;
  /** Unix milliseconds. */
  timestamp: number;
}

function messagingEnvelope(object: 'page' | 'instagram', accountId: string, item: Record<string, unknown>) {
  return { object, entry: [{ id: accountId, time: Date.now(), messaging: [item] }] };
}

export function messengerTextMessage(input: MessagingInbound & { text: string; replyTo?: string }) {
  return messagingEnvelope(input.object ?? 'page', input.accountId, {
    sender: { id: input.from },
    recipient: { id: input.accountId },
    timestamp: input.timestamp,
    message: { mid: input.mid, text: input.text, ...(input.replyTo ? { reply_to: { mid: input.replyTo } } : {}) },
  });
}

export function messengerAttachment(input: MessagingInbound & { type: string; url: string }) {
  return messagingEnvelope(input.object ?? 'page', input.accountId, {
    sender: { id: input.from },
    recipient: { id: input.accountId },
    timestamp: input.timestamp,
    message: { mid: input.mid, attachments: [{ type: input.type, payload: { url: input.url } }] },
  });
}

export function messengerEcho(input: MessagingInbound & { text: string; appId?: number }) {
  return messagingEnvelope(input.object ?? 'page', input.accountId, {
    sender: { id: input.accountId },
    recipient: { id: input.from },
    timestamp: input.timestamp,
    message: { is_echo: true, ...(input.appId !== undefined ? { app_id: input.appId } : {}), mid: input.mid, text: input.text },
  });
}

export function messengerDelivery(input: Omit<MessagingInbound, 'mid' | 'timestamp'> & { mids: string[]; watermark: number }) {
  return messagingEnvelope(input.object ?? 'page', input.accountId, { sender: { id: input.from }, recipient: { id: input.accountId }, delivery: { mids: input.mids, watermark: input.watermark } });
}

export function messengerRead(input: Omit<MessagingInbound, 'mid'> & { watermark: number }) {
  return messagingEnvelope(input.object ?? 'page', input.accountId, { sender: { id: input.from }, recipient: { id: input.accountId }, timestamp: input.timestamp, read: { watermark: input.watermark } });
}

/** Several callbacks' entries as one callback (Meta batches up to 1,000 updates per request). */
export function mergeEntries(payloads: Array<{ object: string; entry: unknown[] }>) {
  return { object: payloads[0].object, entry: payloads.flatMap((p) => p.entry) };
}

/** Posts a payload as Meta does: raw JSON bytes signed with `X-Hub-Signature-256`. */
export async function postCallback(url: string, payload: unknown, appSecret: string, options: { signature?: string } = {}) {
  const raw = Buffer.from(JSON.stringify(payload));
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-hub-signature-256': options.signature ?? signMetaPayload(appSecret, raw) },
    body: raw,
  });
  return { status: response.status, body: await response.text() };
}
