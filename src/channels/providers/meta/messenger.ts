import { Type } from 'typebox';
import {
  ChannelSendError,
  type ChannelProvider,
  type InstagramConnection,
  type MediaKind,
  type MessengerConnection,
  type OutboundRequest,
  type SendResult,
  type UploadFile,
  type UploadResult,
} from '../types.js';
import type { FormValue, GraphClient } from './graph-client.js';
import { lazyCheck } from './payload-schemas.js';
import { codePointLength } from '../../../util/text.js';

/*
 * The Send API for Messenger (`POST /{page-id}/messages`) and Instagram (`POST /{ig-account-id}/messages`):
 * one body shape for both, as Meta documents it. Sender actions (mark_seen, typing_on, react/unreact) go alone
 * in their request, with only `recipient` beside them.
 */

type MessagingConnection = MessengerConnection | InstagramConnection;
type AttachmentType = 'image' | 'audio' | 'video' | 'file';

export type SendApiBody =
  | { recipient: { id: string }; messaging_type: 'RESPONSE'; message: { text: string } }
  | { recipient: { id: string }; messaging_type: 'RESPONSE'; message: { attachment: { type: AttachmentType; payload: { attachment_id: string } } } }
  | { recipient: { id: string }; sender_action: 'mark_seen' | 'typing_on' }
  | { recipient: { id: string }; sender_action: 'react'; payload: { message_id: string; reaction: string } }
  | { recipient: { id: string }; sender_action: 'unreact'; payload: { message_id: string } };

/** Messenger calls a document a `file`. */
export function attachmentType(kind: MediaKind): AttachmentType {
  return kind === 'document' ? 'file' : kind;
}

function recipientOf(handle: string | undefined): { id: string } {
  if (!handle) throw new ChannelSendError('recipient_missing', 'the recipient has no page-scoped id', { retryable: false });
  return { id: handle };
}

/**
 * The Send API bodies of one request, in the order they go out: an attachment with a caption is two messages
 * (Messenger attachments carry no text), a read receipt with the typing indicator two sender actions.
 * `replyToProviderMessageId` is not sent: the Send API has no reply reference for pages.
 */
export function buildSendApiBodies(request: OutboundRequest, provider: 'messenger' | 'instagram' = 'messenger'): SendApiBody[] {
  const recipient = recipientOf(request.recipient.handle);
  switch (request.kind) {
    case 'text':
      checkTextLength(request.text, provider);
      return [{ recipient, messaging_type: 'RESPONSE', message: { text: request.text } }];
    case 'media': {
      const attachment = { type: attachmentType(request.mediaKind), payload: { attachment_id: request.providerMediaId } };
      const bodies: SendApiBody[] = [{ recipient, messaging_type: 'RESPONSE', message: { attachment } }];
      if (request.caption) bodies.push({ recipient, messaging_type: 'RESPONSE', message: { text: request.caption } });
      return bodies;
    }
    case 'reaction':
      return request.emoji
        ? [{ recipient, sender_action: 'react', payload: { message_id: request.targetProviderMessageId, reaction: provider === 'instagram' ? instagramReaction(request.emoji) : request.emoji } }]
        : [{ recipient, sender_action: 'unreact', payload: { message_id: request.targetProviderMessageId } }];
    case 'read_receipt':
      return request.typingIndicator
        ? [{ recipient, sender_action: 'mark_seen' }, { recipient, sender_action: 'typing_on' }]
        : [{ recipient, sender_action: 'mark_seen' }];
    case 'typing':
      return [{ recipient, sender_action: 'typing_on' }];
    case 'template':
      throw new ChannelSendError('unsupported_request', 'Messenger and Instagram have no message templates', { retryable: false });
  }
}

/** Messenger takes at most 2,000 characters a message, Instagram 1,000 bytes (UTF-8): longer is refused, never cut. */
function checkTextLength(text: string, provider: 'messenger' | 'instagram'): void {
  const tooLong = provider === 'instagram' ? Buffer.byteLength(text, 'utf8') > 1000 : codePointLength(text) > 2000;
  if (tooLong) {
    const limit = provider === 'instagram' ? '1,000 bytes' : '2,000 characters';
    throw new ChannelSendError('meta_text_too_long', `${provider === 'instagram' ? 'Instagram' : 'Messenger'} takes at most ${limit} a message`, { retryable: false });
  }
}

/** Hearts Instagram's `love`, the one reaction its Send API documents. */
const HEARTS = new Set(['\u2764\ufe0f', '\u2764', '\u2665\ufe0f', '\u2665']);

/** Instagram reacts by name, and documents only `love`: a heart is sent as it, another emoji is refused. */
function instagramReaction(emoji: string): string {
  if (HEARTS.has(emoji)) return 'love';
  throw new ChannelSendError('meta_reaction_not_supported', 'Instagram reactions can only be a heart (love)', { retryable: false });
}

const SendAnswer = Type.Object({ recipient_id: Type.Optional(Type.String()), message_id: Type.Optional(Type.String()) });
const isSendAnswer = lazyCheck(SendAnswer);
const AttachmentAnswer = Type.Object({ attachment_id: Type.String({ minLength: 1 }) });
const isAttachmentAnswer = lazyCheck(AttachmentAnswer);
const ProfileAnswer = Type.Object({ name: Type.Optional(Type.String()), username: Type.Optional(Type.String()) });
const isProfileAnswer = lazyCheck(ProfileAnswer);

function accountOf(connection: MessagingConnection): { id: string; token: string } {
  return connection.provider === 'messenger'
    ? { id: connection.pageId, token: connection.pageAccessToken }
    : { id: connection.instagramAccountId, token: connection.accessToken };
}

/** Messenger or Instagram through the Send API; one class, the connection tells which. */
export class MessengerSendApiProvider<P extends 'messenger' | 'instagram'> implements ChannelProvider<P> {
  constructor(
    readonly provider: P,
    private readonly graph: GraphClient,
  ) {}

  async send(request: OutboundRequest, connection: Extract<MessagingConnection, { provider: P }>, signal: AbortSignal): Promise<SendResult> {
    const bodies = buildSendApiBodies(request, this.provider);
    const ids: string[] = [];
    for (const body of bodies) {
      const creates = 'message' in body;
      const answer = await this.graph.call({
        method: 'POST',
        path: `/${encodeURIComponent(accountOf(connection).id)}/messages`,
        token: accountOf(connection).token,
        family: 'meta',
        json: body,
        accept: isSendAnswer,
        sends: creates,
        signal,
      });
      if (creates) {
        // A message the Send API accepted without its id cannot be tracked; never retried (it may be out).
        if (!answer.message_id) throw new ChannelSendError('provider_bad_response', 'the Send API accepted the message without an id', { retryable: false, mayHaveBeenSent: true });
        ids.push(answer.message_id);
      }
    }
    const [providerMessageId, ...additional] = ids;
    return { ...(providerMessageId ? { providerMessageId } : {}), ...(additional.length > 0 ? { additionalProviderMessageIds: additional } : {}) };
  }

  /**
   * `POST /{page-id}/message_attachments` (multipart: `message` with the attachment type and `is_reusable`,
   * `filedata`); Instagram adds `platform=instagram` and posts to its account id.
   */
  async upload(file: UploadFile, connection: Extract<MessagingConnection, { provider: P }>, signal: AbortSignal): Promise<UploadResult> {
    const account = accountOf(connection);
    const message = JSON.stringify({ attachment: { type: attachmentType(file.mediaKind), payload: { is_reusable: true } } });
    const platform: Array<[string, FormValue]> = connection.provider === 'instagram' ? [['platform', 'instagram']] : [];
    const answer = await this.graph.call({
      method: 'POST',
      path: `/${encodeURIComponent(account.id)}/message_attachments`,
      token: account.token,
      family: 'meta',
      form: [
        ...platform,
        ['message', message],
        ['filedata', { bytes: file.bytes, contentType: file.contentType, filename: file.filename }],
      ],
      accept: isAttachmentAnswer,
      signal,
    });
    return { providerMediaId: answer.attachment_id };
  }

  /**
   * The guest's profile name: `GET /{psid}?fields=name` (Messenger), `?fields=name,username` (Instagram, whose
   * name may be empty). Undefined when Meta gives none.
   */
  async profileName(handle: string, connection: Extract<MessagingConnection, { provider: P }>, signal: AbortSignal): Promise<string | undefined> {
    const answer = await this.graph.call({
      method: 'GET',
      path: `/${encodeURIComponent(handle)}`,
      query: { fields: connection.provider === 'instagram' ? 'name,username' : 'name' },
      token: accountOf(connection).token,
      family: 'meta',
      accept: isProfileAnswer,
      signal,
    });
    return answer.name || answer.username || undefined;
  }
}
