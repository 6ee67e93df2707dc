import type {
  DeliveryStatus,
  InboundEvent,
  InboundMedia,
  InboundMessageEvent,
  InboundParty,
  ProviderErrorInfo,
  SharedContact,
  SkipCounts,
} from '../types.js';
import {
  isMessagingAttachment,
  isMessagingBase,
  isMessagingDelivery,
  isMessagingEnvelope,
  isMessagingMessage,
  isMessagingPostback,
  isMessagingRead,
  isMessagingReaction,
  isWhatsAppButton,
  isWhatsAppContactCard,
  isWhatsAppContacts,
  isWhatsAppEnvelope,
  isWhatsAppError,
  isWhatsAppInteractive,
  isWhatsAppLocation,
  isWhatsAppMedia,
  isWhatsAppMessageBase,
  isWhatsAppMessagesValue,
  isWhatsAppReaction,
  isWhatsAppStatus,
  isWhatsAppText,
  isWhatsAppUnsupported,
  type MessagingBaseT,
  type WhatsAppErrorT,
  type WhatsAppMessageBaseT,
} from './payload-schemas.js';

export type MetaObject = 'whatsapp_business_account' | 'page' | 'instagram';

export type MetaParseResult =
  | { ok: true; object: MetaObject; events: InboundEvent[]; skipped: number; skippedBy: SkipCounts }
  | { ok: false; reason: 'unknown_object' | 'malformed_envelope' };

/** WhatsApp error code 131047: more than 24 hours since the guest's last message (re-engagement required). */
export const WHATSAPP_REENGAGEMENT_CODE = 131047;

/**
 * Turns a verified Meta callback (`whatsapp_business_account`, `page` or `instagram`) into neutral events.
 * A payload of another object, or not shaped like Meta's envelope, is refused as a whole (the route answers 400
 * and stores nothing). Inside a valid envelope nothing is dropped silently: items we do not turn into events are
 * counted in `skippedBy`, and a message of a type we do not know becomes `type: unsupported`.
 * One pass over the payload, no lookups that grow with its size.
 */
export function parseMetaCallback(payload: unknown): MetaParseResult {
  const collector = new Collector();
  if (isWhatsAppEnvelope(payload)) {
    for (const entry of payload.entry) {
      for (const change of entry.changes) parseWhatsAppChange(change.field, change.value, collector);
    }
    return collector.result('whatsapp_business_account');
  }
  if (isMessagingEnvelope(payload)) {
    const provider = payload.object === 'page' ? 'messenger' : 'instagram';
    for (const entry of payload.entry) {
      for (const item of entry.messaging ?? []) parseMessagingItem(provider, item, entry.time, collector);
      for (const item of entry.standby ?? []) parseMessagingItem(provider, item, entry.time, collector);
      // Instagram comments, mentions and other `changes` fields are not conversations.
      if (entry.changes?.length) collector.skip('changes', entry.changes.length);
    }
    return collector.result(payload.object);
  }
  const object = typeof payload === 'object' && payload !== null && 'object' in payload ? payload.object : undefined;
  const known = object === 'whatsapp_business_account' || object === 'page' || object === 'instagram';
  return { ok: false, reason: known ? 'malformed_envelope' : 'unknown_object' };
}

class Collector {
  readonly events: InboundEvent[] = [];
  readonly skippedBy: SkipCounts = {};
  skipped = 0;

  skip(reason: string, count = 1): void {
    this.skipped += count;
    this.skippedBy[reason] = (this.skippedBy[reason] ?? 0) + count;
  }

  result(object: MetaObject): MetaParseResult {
    return { ok: true, object, events: this.events, skipped: this.skipped, skippedBy: this.skippedBy };
  }
}

// ---------------------------------------------------------------------------------------------
// WhatsApp
// ---------------------------------------------------------------------------------------------

function parseWhatsAppChange(field: string, value: unknown, out: Collector): void {
  if (field !== 'messages') return out.skip(`field:${field.slice(0, 60)}`);
  if (!isWhatsAppMessagesValue(value)) return out.skip('invalid_value');
  const channelRef = value.metadata.phone_number_id;
  // The profile names of this change's senders, by wa_id: a change holds few contacts, one map per change.
  const names = new Map<string, string>();
  for (const contact of value.contacts ?? []) {
    if (contact.wa_id && contact.profile?.name) names.set(contact.wa_id, contact.profile.name);
  }
  for (const raw of value.messages ?? []) {
    if (!isWhatsAppMessageBase(raw)) {
      out.skip('invalid_message');
      continue;
    }
    out.events.push(whatsAppMessage(channelRef, raw, names.get(raw.from)));
  }
  for (const raw of value.statuses ?? []) {
    if (!isWhatsAppStatus(raw)) {
      out.skip('invalid_status');
      continue;
    }
    const status = deliveryStatus(raw.status);
    if (!status) {
      out.skip(`status:${raw.status.slice(0, 40)}`);
      continue;
    }
    const error = status === 'failed' ? whatsAppError(raw.errors?.[0]) : undefined;
    out.events.push({
      kind: 'status',
      provider: 'whatsapp_cloud',
      channelRef,
      providerMessageId: raw.id,
      status,
      timestamp: fromUnix(Number(raw.timestamp)),
      ...(raw.recipient_id ? { recipient: { phone: `+${raw.recipient_id}` } } : {}),
      ...(error ? { error } : {}),
      closesWindow: status === 'failed' && raw.errors?.some((e) => Number(e.code) === WHATSAPP_REENGAGEMENT_CODE) === true,
    });
  }
  for (const raw of value.errors ?? []) {
    if (!isWhatsAppError(raw)) {
      out.skip('invalid_error');
      continue;
    }
    out.events.push({ kind: 'channel_error', provider: 'whatsapp_cloud', channelRef, error: whatsAppError(raw) });
  }
}

function deliveryStatus(status: string): DeliveryStatus | undefined {
  return status === 'sent' || status === 'delivered' || status === 'read' || status === 'failed' ? status : undefined;
}

function whatsAppError(error: WhatsAppErrorT | undefined): ProviderErrorInfo {
  if (!error) return { code: 'whatsapp_unknown', message: 'failed at the provider' };
  const message = error.error_data?.details ?? error.message ?? error.title ?? 'failed at the provider';
  return { code: `whatsapp_${String(error.code)}`, message };
}

const MEDIA_TYPES = ['image', 'audio', 'video', 'document', 'sticker'] as const;
type WhatsAppMediaType = (typeof MEDIA_TYPES)[number];

function isMediaType(type: string): type is WhatsAppMediaType {
  return MEDIA_TYPES.some((t) => t === type);
}

function whatsAppMessage(channelRef: string, raw: WhatsAppMessageBaseT, profileName: string | undefined): InboundMessageEvent {
  const sender: InboundParty = { phone: `+${raw.from}`, ...(profileName ? { profileName } : {}) };
  const event: InboundMessageEvent = {
    kind: 'message',
    provider: 'whatsapp_cloud',
    channelRef,
    providerMessageId: raw.id,
    sender,
    timestamp: fromUnix(Number(raw.timestamp)),
    type: 'unsupported',
    ...(raw.context?.id ? { replyToProviderMessageId: raw.context.id } : {}),
  };
  const type = raw.type;
  if (type === 'text' && isWhatsAppText(raw)) return { ...event, type: 'text', text: raw.text.body };
  if (isMediaType(type) && isWhatsAppMedia(raw)) {
    const media = raw[type];
    if (media) {
      const found: InboundMedia = {
        providerMediaId: media.id,
        ...(media.mime_type ? { contentType: media.mime_type } : {}),
        ...(media.filename ? { filename: media.filename } : {}),
        ...(media.sha256 ? { sha256: media.sha256 } : {}),
        ...(media.voice !== undefined ? { voice: media.voice } : {}),
      };
      return { ...event, type, media: found, ...(media.caption ? { text: media.caption } : {}) };
    }
  }
  if (type === 'location' && isWhatsAppLocation(raw)) {
    const { latitude, longitude, name, address } = raw.location;
    return { ...event, type: 'location', location: { latitude, longitude, ...(name ? { name } : {}), ...(address ? { address } : {}) } };
  }
  if (type === 'contacts' && isWhatsAppContacts(raw)) {
    const contacts = raw.contacts.filter(isWhatsAppContactCard).map(sharedContact);
    if (contacts.length > 0) return { ...event, type: 'contacts', contacts };
  }
  if (type === 'interactive' && isWhatsAppInteractive(raw)) {
    const i = raw.interactive;
    const choice = i.type === 'button_reply' ? i.button_reply : i.list_reply;
    return { ...event, type: 'interactive_reply', text: choice.title, interactive: { kind: i.type, id: choice.id, title: choice.title } };
  }
  if (type === 'button' && isWhatsAppButton(raw)) {
    const { text, payload } = raw.button;
    return { ...event, type: 'interactive_reply', text, interactive: { kind: 'button_reply', id: payload ?? text, title: text } };
  }
  if (type === 'reaction' && isWhatsAppReaction(raw)) {
    return { ...event, type: 'reaction', reaction: { emoji: raw.reaction.emoji ?? '', targetProviderMessageId: raw.reaction.message_id } };
  }
  // Anything else — a type we do not know, or a known type whose body is not what Meta documents — is kept.
  const reason = type === 'unsupported' && isWhatsAppUnsupported(raw) && raw.unsupported.type ? raw.unsupported.type : type;
  return { ...event, unsupportedReason: reason.slice(0, 60) };
}

function sharedContact(card: {
  name?: { formatted_name?: string; first_name?: string; last_name?: string };
  phones?: Array<{ phone?: string; wa_id?: string }>;
  emails?: Array<{ email?: string }>;
}): SharedContact {
  const joined = [card.name?.first_name, card.name?.last_name].filter(Boolean).join(' ');
  const phones: string[] = [];
  const whatsappIds: string[] = [];
  for (const p of card.phones ?? []) {
    if (p.phone) phones.push(p.phone);
    if (p.wa_id) whatsappIds.push(`+${p.wa_id}`);
  }
  const emails = (card.emails ?? []).flatMap((e) => (e.email ? [e.email] : []));
  return { name: card.name?.formatted_name ?? joined, phones, emails, whatsappIds };
}

// ---------------------------------------------------------------------------------------------
// Messenger and Instagram
// ---------------------------------------------------------------------------------------------

type MessagingProvider = 'messenger' | 'instagram';

function parseMessagingItem(provider: MessagingProvider, item: unknown, entryTime: number | undefined, out: Collector): void {
  if (!isMessagingBase(item)) return out.skip('invalid_messaging');
  const at = item.timestamp !== undefined ? fromUnix(Number(item.timestamp)) : entryTime !== undefined ? fromUnix(entryTime) : undefined;

  if (isMessagingMessage(item)) {
    if (!at) return out.skip('missing_timestamp');
    out.events.push(messagingMessage(provider, item, item.message, at));
    return;
  }
  if (isMessagingPostback(item)) {
    const { mid, title, payload } = item.postback;
    if (!mid || !at) return out.skip('postback_without_mid');
    const label = title ?? payload ?? '';
    out.events.push({
      kind: 'message',
      provider,
      channelRef: item.recipient.id,
      providerMessageId: mid,
      sender: { handle: item.sender.id },
      timestamp: at,
      type: 'interactive_reply',
      ...(label ? { text: label } : {}),
      interactive: { kind: 'button_reply', id: payload ?? label, title: label },
    });
    return;
  }
  if (isMessagingReaction(item)) {
    if (!at) return out.skip('missing_timestamp');
    const r = item.reaction;
    const removed = r.action === 'unreact';
    out.events.push({
      kind: 'message',
      provider,
      channelRef: item.recipient.id,
      // A reaction has no id of its own: one reaction per guest and target, so a redelivery dedupes and a change
      // of emoji at another time is a new event.
      providerMessageId: `reaction:${r.mid}:${item.sender.id}:${at.getTime()}`,
      sender: { handle: item.sender.id },
      timestamp: at,
      type: 'reaction',
      reaction: { emoji: removed ? '' : (r.emoji ?? ''), targetProviderMessageId: r.mid },
    });
    return;
  }
  if (isMessagingDelivery(item)) {
    const { mids, watermark } = item.delivery;
    out.events.push(watermarkEvent(provider, item, 'delivered', mids ?? [], watermark, at));
    return;
  }
  if (isMessagingRead(item)) {
    const { mid, watermark } = item.read;
    out.events.push(watermarkEvent(provider, item, 'read', mid ? [mid] : [], watermark, at));
    return;
  }
  out.skip('messaging:other');
}

function watermarkEvent(
  provider: MessagingProvider,
  item: MessagingBaseT,
  status: 'delivered' | 'read',
  providerMessageIds: string[],
  watermark: number | undefined,
  at: Date | undefined,
): InboundEvent {
  // The guest sent the receipt: the business is the recipient.
  return {
    kind: 'watermark',
    provider,
    channelRef: item.recipient.id,
    contact: { handle: item.sender.id },
    status,
    providerMessageIds,
    ...(watermark !== undefined ? { watermark: fromUnix(watermark) } : {}),
    ...(at ? { timestamp: at } : {}),
  };
}

type MessagingMessageBody = {
  mid: string;
  text?: string;
  is_echo?: boolean;
  app_id?: number | string;
  attachments?: unknown[];
  quick_reply?: { payload: string };
  reply_to?: { mid?: string };
  is_deleted?: boolean;
  is_unsupported?: boolean;
};

const ATTACHMENT_TYPES: Record<string, InboundMessageEvent['type']> = {
  image: 'image',
  audio: 'audio',
  video: 'video',
  file: 'document',
  sticker: 'sticker',
};

function messagingMessage(provider: MessagingProvider, item: MessagingBaseT, message: MessagingMessageBody, at: Date): InboundMessageEvent {
  const echo = message.is_echo === true;
  // An echo is the business's own message: the page/account is the sender, the guest the recipient.
  const channelRef = echo ? item.sender.id : item.recipient.id;
  const guest: InboundParty = { handle: echo ? item.recipient.id : item.sender.id };
  const event: InboundMessageEvent = {
    kind: 'message',
    provider,
    channelRef,
    providerMessageId: message.mid,
    sender: echo ? { handle: item.sender.id } : guest,
    timestamp: at,
    type: 'unsupported',
    ...(message.text !== undefined && message.text !== '' ? { text: message.text } : {}),
    ...(message.reply_to?.mid ? { replyToProviderMessageId: message.reply_to.mid } : {}),
    ...(echo ? { echo: { recipient: guest, ...(message.app_id !== undefined ? { appId: String(message.app_id) } : {}) } } : {}),
  };
  if (message.quick_reply) {
    const title = message.text ?? message.quick_reply.payload;
    return { ...event, type: 'interactive_reply', interactive: { kind: 'button_reply', id: message.quick_reply.payload, title } };
  }
  const attachments = message.attachments ?? [];
  if (attachments.length > 0) {
    // A sticker comes as a `sticker` attachment, and until Meta's transition ends also as an `image` one with a
    // `sticker_id`: either makes the message a sticker. Otherwise only the first attachment becomes the message's
    // media (Meta sends several only for albums).
    const valid = attachments.filter(isMessagingAttachment);
    const sticker = valid.find((a) => a.type === 'sticker' || a.payload?.sticker_id !== undefined);
    const first = sticker ?? valid[0];
    if (!first || valid.length < attachments.length) return { ...event, unsupportedReason: 'attachment' };
    const type = sticker ? 'sticker' : ATTACHMENT_TYPES[first.type];
    const url = first.payload?.url;
    if (type && url) {
      const filename = type === 'document' ? filenameOf(url) : undefined;
      return { ...event, type, media: { url, ...(filename ? { filename } : {}) } };
    }
    return { ...event, unsupportedReason: first.type.slice(0, 60) };
  }
  if (event.text !== undefined) return { ...event, type: 'text' };
  return { ...event, unsupportedReason: message.is_deleted ? 'deleted' : 'empty' };
}

/** The file name a document's CDN URL ends with (`…/12345_booking.pdf?…`), when it looks like one. */
function filenameOf(url: string): string | undefined {
  try {
    const last = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
    return /^[\w .()+-]{1,200}\.[A-Za-z0-9]{1,10}$/u.test(last) ? last : undefined;
  } catch {
    return undefined;
  }
}

/** Meta's timestamps: Unix seconds (WhatsApp, some Messenger examples) or milliseconds (Messenger/Instagram). */
function fromUnix(value: number): Date {
  // Below 1e11 a value is seconds (milliseconds that small would be 1973).
  return new Date(value < 1e11 ? value * 1000 : value);
}
