/**
 * The neutral seam between channel providers and the shared channel code (DESIGN.md habit 20).
 *
 * A provider has two halves: `parse` turns a verified raw callback into the neutral inbound events below, and
 * `send` hands one neutral outbound request to the provider. Everything else — contacts, conversations,
 * windows, dedupe by provider message id, events — is shared code that knows no provider.
 */

export type ProviderName = 'sandbox' | 'whatsapp_cloud' | 'messenger' | 'instagram' | 'webchat';

/** Message types of decisions 7.2. */
export type MessageType =
  | 'text'
  | 'image'
  | 'audio'
  | 'video'
  | 'document'
  | 'sticker'
  | 'location'
  | 'contacts'
  | 'interactive_reply'
  | 'reaction'
  | 'template'
  | 'unsupported';

/** What a guest can send: every type except `template`, which only the business sends. */
export type InboundMessageType = Exclude<MessageType, 'template'>;

// ---------------------------------------------------------------------------------------------
// Inbound events
// ---------------------------------------------------------------------------------------------

/**
 * Who sent an inbound message. WhatsApp addresses by phone (`wa_id` with a leading '+'); Messenger and
 * Instagram by the page-scoped id (`handle`). `profileName` only when the provider gave one.
 */
export interface InboundParty {
  phone?: string;
  handle?: string;
  profileName?: string;
}

/** Media of an inbound message: downloaded later by a job, by provider media id (WhatsApp) or URL (Messenger/IG). */
export interface InboundMedia {
  providerMediaId?: string;
  url?: string;
  /** The provider's MIME type, when it says (WhatsApp always does; Messenger/IG never). */
  contentType?: string;
  filename?: string;
  sha256?: string;
  /** WhatsApp marks recorded voice notes among audio messages. */
  voice?: boolean;
}

export interface InboundLocation {
  latitude: number;
  longitude: number;
  name?: string;
  address?: string;
}

/** A shared contact card, kept compact: a name and the ways to reach the person. */
export interface SharedContact {
  name: string;
  phones: string[];
  emails: string[];
  /** WhatsApp ids (E.164 with '+') of the card's phones that are on WhatsApp. */
  whatsappIds: string[];
}

export type InteractiveKind = 'button_reply' | 'list_reply';

/** A tap on a button, list row, quick reply or postback: `id` is the developer's payload, `title` what the guest saw. */
export interface InteractiveReply {
  kind: InteractiveKind;
  id: string;
  title: string;
}

export interface InboundReaction {
  /** The emoji; '' when the guest removed the reaction. */
  emoji: string;
  targetProviderMessageId: string;
}

export interface InboundMessageEvent {
  kind: 'message';
  provider: ProviderName;
  /** The business side: WhatsApp phone-number id, Facebook page id or Instagram account id. */
  channelRef: string;
  providerMessageId: string;
  sender: InboundParty;
  /** The provider's timestamp: the message time and the start of the customer-service window. */
  timestamp: Date;
  type: InboundMessageType;
  /** Body or caption; absent when there is none. */
  text?: string;
  media?: InboundMedia;
  location?: InboundLocation;
  contacts?: SharedContact[];
  interactive?: InteractiveReply;
  reaction?: InboundReaction;
  replyToProviderMessageId?: string;
  /**
   * Messenger/Instagram `is_echo`: a message the business sent (from this service or another tool). `sender` is
   * then the business itself and `recipient` the guest; `appId` tells which app sent it.
   */
  echo?: { recipient: InboundParty; appId?: string };
  /** For `unsupported`: what the provider called it (e.g. WhatsApp `order`, `system`, Messenger `fallback`). */
  unsupportedReason?: string;
}

export type DeliveryStatus = 'sent' | 'delivered' | 'read' | 'failed';

/** A provider error in the neutral form: `code` is `whatsapp_<code>` or `meta_<code>`. */
export interface ProviderErrorInfo {
  code: string;
  message: string;
}

/** WhatsApp `statuses[]`: one outbound message moved to a status. */
export interface DeliveryStatusEvent {
  kind: 'status';
  provider: ProviderName;
  channelRef: string;
  providerMessageId: string;
  status: DeliveryStatus;
  timestamp: Date;
  /** The guest the message went to (E.164), when the provider says. */
  recipient?: InboundParty;
  error?: ProviderErrorInfo;
  /** The failure means the customer-service window is closed (WhatsApp 131047, re-engagement). */
  closesWindow: boolean;
}

/**
 * Messenger/Instagram `delivery` and `read`: every outbound message to `contact` sent at or before `watermark`
 * (and those listed in `providerMessageIds`) reached `status`.
 */
export interface WatermarkEvent {
  kind: 'watermark';
  provider: ProviderName;
  channelRef: string;
  contact: InboundParty;
  status: 'delivered' | 'read';
  watermark?: Date;
  providerMessageIds: string[];
  timestamp?: Date;
}

/** A problem Meta reports about the channel itself, not about one message (WhatsApp `value.errors`). */
export interface ChannelErrorEvent {
  kind: 'channel_error';
  provider: ProviderName;
  channelRef: string;
  error: ProviderErrorInfo;
}

export type InboundEvent = InboundMessageEvent | DeliveryStatusEvent | WatermarkEvent | ChannelErrorEvent;

/** Parts of a callback the parser did not turn into events, counted by reason (nothing is dropped silently). */
export type SkipCounts = Record<string, number>;

// ---------------------------------------------------------------------------------------------
// Outbound requests
// ---------------------------------------------------------------------------------------------

/** The guest a request goes to: WhatsApp by phone (E.164), Messenger/Instagram by page-scoped id. */
export interface Recipient {
  phone?: string;
  handle?: string;
}

export type MediaKind = 'image' | 'audio' | 'video' | 'document';

export interface TextContent {
  kind: 'text';
  text: string;
  replyToProviderMessageId?: string;
}

export interface TemplateContent {
  kind: 'template';
  name: string;
  locale: string;
  bodyParameters: string[];
}

export interface MediaContent {
  kind: 'media';
  mediaKind: MediaKind;
  /** What `upload` returned: WhatsApp media id, Messenger/Instagram attachment id. */
  providerMediaId: string;
  caption?: string;
  filename?: string;
  replyToProviderMessageId?: string;
}

export interface ReactionContent {
  kind: 'reaction';
  targetProviderMessageId: string;
  /** '' removes the reaction. */
  emoji: string;
}

/** Marks the guest's messages read (WhatsApp: up to `providerMessageId`); optionally shows the typing indicator. */
export interface ReadReceiptContent {
  kind: 'read_receipt';
  providerMessageId: string;
  typingIndicator: boolean;
}

/**
 * The typing indicator alone. WhatsApp only shows it with a read receipt, so there it needs the newest inbound
 * message's id; Messenger/Instagram ignore `providerMessageId`.
 */
export interface TypingContent {
  kind: 'typing';
  providerMessageId?: string;
}

export type OutboundContent = TextContent | TemplateContent | MediaContent | ReactionContent | ReadReceiptContent | TypingContent;

export type OutboundRequest = OutboundContent & { recipient: Recipient };

export interface SendResult {
  /** Absent for requests that create no message (read receipts, typing, Messenger reactions). */
  providerMessageId?: string;
  /** Further messages one request became (a Messenger/Instagram caption goes as its own text message). */
  additionalProviderMessageIds?: string[];
}

/** A file handed to a provider's upload, which answers the id to send it by. */
export interface UploadFile {
  mediaKind: MediaKind;
  contentType: string;
  filename: string;
  bytes: Uint8Array;
}

export interface UploadResult {
  providerMediaId: string;
}

// ---------------------------------------------------------------------------------------------
// Connections and the provider interface
// ---------------------------------------------------------------------------------------------

export interface WhatsAppCloudConnection {
  provider: 'whatsapp_cloud';
  phoneNumberId: string;
  wabaId: string;
  /** The channel's own token, or META_SYSTEM_USER_TOKEN when it has none (decided by the caller). */
  accessToken: string;
}

export interface MessengerConnection {
  provider: 'messenger';
  pageId: string;
  pageAccessToken: string;
}

export interface InstagramConnection {
  provider: 'instagram';
  instagramAccountId: string;
  accessToken: string;
}

export interface WebchatConnection {
  provider: 'webchat';
  widgetId: string;
  allowedOrigins: string[];
}

export interface SandboxConnection {
  provider: 'sandbox';
}

export type ChannelConnection = WhatsAppCloudConnection | MessengerConnection | InstagramConnection | WebchatConnection | SandboxConnection;

export type ConnectionOf<P extends ProviderName> = Extract<ChannelConnection, { provider: P }>;

/**
 * One provider's sending half. Every method takes the channel's decrypted connection, so one instance serves every
 * channel of that provider; `signal` aborts the call (job lease lost, shutdown).
 */
export interface ChannelProvider<P extends ProviderName = ProviderName> {
  readonly provider: P;
  /** Hands one request to the provider; resolves once it accepted it. Throws a `ChannelSendError`. */
  send(request: OutboundRequest, connection: ConnectionOf<P>, signal: AbortSignal): Promise<SendResult>;
  /** Uploads a file for a later `media` request; absent when the provider sends files another way. */
  upload?(file: UploadFile, connection: ConnectionOf<P>, signal: AbortSignal): Promise<UploadResult>;
}

/**
 * A refusal or failure of a provider call.
 * - `retryable`: trying again later may succeed (rate limits, 5xx, timeouts).
 * - `mayHaveBeenSent`: the provider may have accepted the request (a timeout after the request went out, a 2xx
 *   with an unusable body); a caller that must never send twice treats it as sent-unknown, not as failed.
 * - `closesWindow`: the provider says the customer-service window is closed.
 */
export class ChannelSendError extends Error {
  readonly retryable: boolean;
  readonly mayHaveBeenSent: boolean;
  readonly closesWindow: boolean;

  constructor(
    readonly code: string,
    message: string,
    flags: { retryable: boolean; mayHaveBeenSent?: boolean; closesWindow?: boolean },
  ) {
    super(message);
    this.name = 'ChannelSendError';
    this.retryable = flags.retryable;
    this.mayHaveBeenSent = flags.mayHaveBeenSent ?? false;
    this.closesWindow = flags.closesWindow ?? false;
  }
}
