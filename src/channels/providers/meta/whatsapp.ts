import { Type } from 'typebox';
import {
  ChannelSendError,
  type ChannelProvider,
  type MediaContent,
  type OutboundContent,
  type OutboundRequest,
  type SendResult,
  type UploadFile,
  type UploadResult,
  type WhatsAppCloudConnection,
} from '../types.js';
import type { GraphClient, MediaDownload } from './graph-client.js';
import { lazyCheck } from './payload-schemas.js';

/*
 * WhatsApp Cloud API: the request bodies of POST /{phone-number-id}/messages as Meta documents them, the media
 * upload and download, and the template list. Bodies are built by pure functions so tests (and the fake Graph API)
 * can hold them to Meta's shapes.
 */

const PRODUCT = 'whatsapp';

interface Addressed {
  messaging_product: 'whatsapp';
  recipient_type: 'individual';
  to: string;
  context?: { message_id: string };
}

export type WhatsAppMessageBody =
  | (Addressed & { type: 'text'; text: { body: string; preview_url: false } })
  | (Addressed & { type: 'template'; template: { name: string; language: { code: string }; components?: Array<{ type: 'body'; parameters: Array<{ type: 'text'; text: string }> }> } })
  | (Addressed & { type: 'image'; image: { id: string; caption?: string } })
  | (Addressed & { type: 'video'; video: { id: string; caption?: string } })
  | (Addressed & { type: 'audio'; audio: { id: string } })
  | (Addressed & { type: 'document'; document: { id: string; caption?: string; filename?: string } })
  | (Addressed & { type: 'reaction'; reaction: { message_id: string; emoji: string } });

export interface WhatsAppReadBody {
  messaging_product: 'whatsapp';
  status: 'read';
  message_id: string;
  typing_indicator?: { type: 'text' };
}

/** WhatsApp's `to`: the E.164 number without its '+'. */
function toNumber(phone: string | undefined): string {
  const digits = phone?.replace(/^\+/, '') ?? '';
  if (!/^[0-9]{6,15}$/.test(digits)) throw new ChannelSendError('recipient_missing', 'the recipient has no WhatsApp phone number', { retryable: false });
  return digits;
}

function addressed(to: string, replyTo: string | undefined): Addressed {
  return { messaging_product: PRODUCT, recipient_type: 'individual', to, ...(replyTo ? { context: { message_id: replyTo } } : {}) };
}

/** The body of one message request; read receipts and typing have their own body (`buildWhatsAppRead`). */
export function buildWhatsAppMessage(content: Exclude<OutboundContent, { kind: 'read_receipt' | 'typing' }>, phone: string | undefined): WhatsAppMessageBody {
  const to = toNumber(phone);
  switch (content.kind) {
    case 'text':
      return { ...addressed(to, content.replyToProviderMessageId), type: 'text', text: { body: content.text, preview_url: false } };
    case 'template':
      return {
        ...addressed(to, undefined),
        type: 'template',
        template: {
          name: content.name,
          language: { code: content.locale },
          ...(content.bodyParameters.length > 0
            ? { components: [{ type: 'body', parameters: content.bodyParameters.map((text) => ({ type: 'text', text })) }] }
            : {}),
        },
      };
    case 'media':
      return mediaBody(addressed(to, content.replyToProviderMessageId), content);
    case 'reaction':
      // An empty emoji removes the reaction, as Meta documents.
      return { ...addressed(to, undefined), type: 'reaction', reaction: { message_id: content.targetProviderMessageId, emoji: content.emoji } };
  }
}

function mediaBody(base: Addressed, content: MediaContent): WhatsAppMessageBody {
  const caption = content.caption ? { caption: content.caption } : {};
  switch (content.mediaKind) {
    case 'image':
      return { ...base, type: 'image', image: { id: content.providerMediaId, ...caption } };
    case 'video':
      return { ...base, type: 'video', video: { id: content.providerMediaId, ...caption } };
    case 'audio':
      // Audio takes no caption: `send` follows it with the caption as a text message.
      return { ...base, type: 'audio', audio: { id: content.providerMediaId } };
    case 'document':
      return { ...base, type: 'document', document: { id: content.providerMediaId, ...caption, ...(content.filename ? { filename: content.filename } : {}) } };
  }
}

/** Marks the guest's message (and those before it) read; with `typing`, shows the typing indicator too. */
export function buildWhatsAppRead(messageId: string, typing: boolean): WhatsAppReadBody {
  return { messaging_product: PRODUCT, status: 'read', message_id: messageId, ...(typing ? { typing_indicator: { type: 'text' } } : {}) };
}

const SendAnswer = Type.Object({
  messaging_product: Type.Optional(Type.String()),
  contacts: Type.Optional(Type.Array(Type.Object({ input: Type.Optional(Type.String()), wa_id: Type.Optional(Type.String()) }))),
  messages: Type.Array(Type.Object({ id: Type.String({ minLength: 1 }) }), { minItems: 1 }),
});
const isSendAnswer = lazyCheck(SendAnswer);
const SuccessAnswer = Type.Object({ success: Type.Literal(true) });
const isSuccessAnswer = lazyCheck(SuccessAnswer);
const UploadAnswer = Type.Object({ id: Type.String({ minLength: 1 }) });
const isUploadAnswer = lazyCheck(UploadAnswer);
const MediaInfo = Type.Object({
  url: Type.String({ minLength: 1 }),
  mime_type: Type.Optional(Type.String()),
  sha256: Type.Optional(Type.String()),
  file_size: Type.Optional(Type.Union([Type.String(), Type.Number()])),
  id: Type.Optional(Type.String()),
});
const isMediaInfo = lazyCheck(MediaInfo);
const TemplatePage = Type.Object({
  data: Type.Array(Type.Object({ name: Type.String(), language: Type.String(), status: Type.String(), category: Type.Optional(Type.String()) })),
  paging: Type.Optional(Type.Object({ cursors: Type.Optional(Type.Object({ after: Type.Optional(Type.String()) })), next: Type.Optional(Type.String()) })),
});
const isTemplatePage = lazyCheck(TemplatePage);

/** One template in one language, as the template sync stores it. */
export interface WhatsAppTemplate {
  templateName: string;
  category: string;
  locale: string;
  /** Meta's status, lower-cased (approved, pending, rejected, paused, disabled, …). */
  status: string;
  ready: boolean;
}

export interface MediaDownloadRequest {
  maxBytes: number;
  /** The MIME type the callback announced. */
  expectedContentType?: string;
  signal: AbortSignal;
}

/** Far more pages than any account has templates: a guard against a paging loop, not a limit anyone meets. */
const MAX_TEMPLATE_PAGES = 100;

/** The WhatsApp Cloud API half of a channel provider. */
export class WhatsAppCloudProvider implements ChannelProvider<'whatsapp_cloud'> {
  readonly provider = 'whatsapp_cloud' as const;

  constructor(private readonly graph: GraphClient) {}

  async send(request: OutboundRequest, connection: WhatsAppCloudConnection, signal: AbortSignal): Promise<SendResult> {
    if (request.kind === 'read_receipt' || request.kind === 'typing') {
      const messageId = request.providerMessageId;
      if (!messageId) throw new ChannelSendError('typing_needs_message', 'WhatsApp shows the typing indicator only with the read receipt of a guest message', { retryable: false });
      await this.post(connection, buildWhatsAppRead(messageId, request.kind === 'typing' || request.typingIndicator), isSuccessAnswer, false, signal);
      return {};
    }
    const body = buildWhatsAppMessage(request, request.recipient.phone);
    const answer = await this.post(connection, body, isSendAnswer, true, signal);
    const providerMessageId = answer.messages[0].id;
    if (request.kind === 'media' && request.mediaKind === 'audio' && request.caption) {
      const caption = buildWhatsAppMessage({ kind: 'text', text: request.caption }, request.recipient.phone);
      const captionAnswer = await this.post(connection, caption, isSendAnswer, true, signal);
      return { providerMessageId, additionalProviderMessageIds: [captionAnswer.messages[0].id] };
    }
    return { providerMessageId };
  }

  /** `POST /{phone-number-id}/media` (multipart: messaging_product, type = the MIME type, file). */
  async upload(file: UploadFile, connection: WhatsAppCloudConnection, signal: AbortSignal): Promise<UploadResult> {
    const answer = await this.graph.call({
      method: 'POST',
      path: `/${encodeURIComponent(connection.phoneNumberId)}/media`,
      token: connection.accessToken,
      family: 'whatsapp',
      form: [
        ['messaging_product', PRODUCT],
        ['type', file.contentType],
        ['file', { bytes: file.bytes, contentType: file.contentType, filename: file.filename }],
      ],
      accept: isUploadAnswer,
      signal,
    });
    return { providerMediaId: answer.id };
  }

  /** `GET /{media-id}` for its short-lived URL, then that URL with the bearer token, streamed under the cap. */
  async downloadMedia(mediaId: string, connection: WhatsAppCloudConnection, options: MediaDownloadRequest): Promise<MediaDownload> {
    const info = await this.graph.call({
      method: 'GET',
      path: `/${encodeURIComponent(mediaId)}`,
      query: { phone_number_id: connection.phoneNumberId },
      token: connection.accessToken,
      family: 'whatsapp',
      accept: isMediaInfo,
      signal: options.signal,
    });
    const expectedContentType = options.expectedContentType ?? info.mime_type;
    return this.graph.download(info.url, {
      token: connection.accessToken,
      maxBytes: options.maxBytes,
      ...(expectedContentType ? { expectedContentType } : {}),
      signal: options.signal,
    });
  }

  /** `GET /{waba-id}/message_templates`, every page, one row per template and language. */
  async listTemplates(connection: WhatsAppCloudConnection, signal: AbortSignal): Promise<WhatsAppTemplate[]> {
    const templates: WhatsAppTemplate[] = [];
    let after: string | undefined;
    for (let page = 0; page < MAX_TEMPLATE_PAGES; page++) {
      const answer = await this.graph.call({
        method: 'GET',
        path: `/${encodeURIComponent(connection.wabaId)}/message_templates`,
        // The cursor, not `paging.next`: a URL from an answer is never followed.
        query: { fields: 'name,language,status,category', limit: '100', ...(after ? { after } : {}) },
        token: connection.accessToken,
        family: 'whatsapp',
        accept: isTemplatePage,
        signal,
      });
      for (const t of answer.data) {
        templates.push({ templateName: t.name, category: (t.category ?? '').toLowerCase(), locale: t.language, status: t.status.toLowerCase(), ready: t.status === 'APPROVED' });
      }
      after = answer.paging?.next ? answer.paging.cursors?.after : undefined;
      if (!after) break;
    }
    return templates;
  }

  private post<T>(connection: WhatsAppCloudConnection, json: WhatsAppMessageBody | WhatsAppReadBody, accept: (v: unknown) => v is T, sends: boolean, signal: AbortSignal): Promise<T> {
    return this.graph.call({
      method: 'POST',
      path: `/${encodeURIComponent(connection.phoneNumberId)}/messages`,
      token: connection.accessToken,
      family: 'whatsapp',
      json,
      accept,
      sends,
      signal,
    });
  }
}
