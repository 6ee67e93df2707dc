import type { Clock } from '../../clock.js';
import type { Db } from '../../db/driver.js';
import { newId } from '../../ids.js';
import { ChannelSendError, type ChannelProvider, type OutboundRequest, type SendResult, type UploadFile, type UploadResult, type WebchatConnection } from '../providers/types.js';
import { webchatRepo, type WebchatEventKind } from './repo.js';
import { WEBCHAT_CHANNEL, type VisitorMessage } from './service.js';

/** Where the widget fetches a file the business sent (GET, with the visitor's session token). */
export function mediaPath(mediaId: string): string {
  return `/webchat/v1/media/${encodeURIComponent(mediaId)}`;
}

const NO_SESSION = 'the visitor of this conversation has no session on this widget';

function noVisitor(message: string): ChannelSendError {
  return new ChannelSendError('webchat_no_visitor', message, { retryable: false });
}

/**
 * The webchat provider: the "provider" is this server, so a send is writing the event to the visitor's stream
 * (which wakes every node's open streams), one statement, and succeeds at once. Messages get a provider message id
 * `wcm_…`, the id the widget knows them by (reactions and "seen" name it too).
 */
export class WebchatProvider implements ChannelProvider<'webchat'> {
  readonly provider = 'webchat' as const;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async send(request: OutboundRequest, connection: WebchatConnection, _signal?: AbortSignal): Promise<SendResult> {
    const visitorId = request.recipient.handle;
    if (!visitorId) throw noVisitor('the conversation has no webchat visitor to send to');
    const { widgetId } = connection;
    const now = this.clock.now();
    const at = now.toISOString();
    const events: Array<{ kind: WebchatEventKind; data: Record<string, unknown> }> = [];
    let result: SendResult = {};
    switch (request.kind) {
      case 'text':
      case 'template': {
        const messageId = newId('wcm', 24);
        const text = request.kind === 'text' ? request.text : request.bodyParameters.join(' ');
        const message: Omit<VisitorMessage, 'eventId'> = {
          messageId,
          direction: 'outbound',
          type: 'text',
          text,
          ...(request.kind === 'text' && request.replyToProviderMessageId ? { replyToMessageId: request.replyToProviderMessageId } : {}),
          createdAt: at,
        };
        events.push({ kind: 'message', data: { ...message } });
        result = { providerMessageId: messageId };
        break;
      }
      case 'media': {
        const media = await webchatRepo.media(this.db, request.providerMediaId, widgetId);
        if (!media) {
          // The visitor's absence is the first thing a send is refused for.
          if (!(await webchatRepo.session(this.db, visitorId, widgetId))) throw noVisitor(NO_SESSION);
          throw new ChannelSendError('webchat_media_missing', 'the file was not uploaded to this widget', { retryable: false });
        }
        const messageId = newId('wcm', 24);
        const message: Omit<VisitorMessage, 'eventId'> = {
          messageId,
          direction: 'outbound',
          type: request.mediaKind,
          ...(request.caption ? { text: request.caption } : {}),
          attachment: { mediaId: media.id, url: mediaPath(media.id), contentType: media.content_type, filename: request.filename ?? media.filename, kind: request.mediaKind },
          ...(request.replyToProviderMessageId ? { replyToMessageId: request.replyToProviderMessageId } : {}),
          createdAt: at,
        };
        events.push({ kind: 'message', data: { ...message } });
        result = { providerMessageId: messageId };
        break;
      }
      case 'reaction':
        events.push({ kind: 'reaction', data: { messageId: request.targetProviderMessageId, emoji: request.emoji, at } });
        result = { providerMessageId: newId('wcr', 24) };
        break;
      case 'read_receipt':
        events.push({ kind: 'read', data: { upToMessageId: request.providerMessageId, at } });
        if (request.typingIndicator) events.push({ kind: 'typing', data: { at } });
        break;
      case 'typing':
        events.push({ kind: 'typing', data: { at } });
        break;
    }
    // One statement: the session checked, the visitor's writers serialised, the events written, every node woken.
    const written = await webchatRepo.writeEvents(this.db, { visitorId, widgetId, events, now, notifyName: this.db.notifyName(WEBCHAT_CHANNEL) });
    if (!written) throw noVisitor(NO_SESSION);
    this.db.wake(WEBCHAT_CHANNEL);
    return result;
  }

  /** Keeps the file for the widget to fetch; the id is sent by a later `media` request. */
  async upload(file: UploadFile, connection: WebchatConnection, _signal?: AbortSignal): Promise<UploadResult> {
    const id = newId('wcf', 24);
    await webchatRepo.insertMedia(this.db, { id, widgetId: connection.widgetId, contentType: file.contentType, filename: file.filename, bytes: file.bytes, now: this.clock.now() });
    return { providerMediaId: id };
  }
}
