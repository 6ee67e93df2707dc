import { BinaryBody, BinaryResponse, defineOperation, replayable, type KnownError } from '../operations/define.js';
import { ListMessagesQuery, MessageList, MessageParams, MessageResponse, ReactionAccepted, ReactionBody, ReplyAccepted, ReplyBody, TypingAccepted } from './message-schema.js';
import { ConversationItem, ConversationParams } from './schema.js';
import { Ref } from '../http/schemas.js';
import type { ConversationContentService } from './content.js';
import type { ReplyService } from '../messaging/reply.js';
import type { TypingService } from '../messaging/receipts.js';

/** What the conversation content operations call. */
export interface ConversationContentOperationServices {
  conversationContent: ConversationContentService;
  replies: ReplyService;
  typing: TypingService;
}

const common = { area: 'conversations', tag: 'Conversations' } as const;
const at = '2026-11-24T10:00:00.000Z';
const conversationId = 'cnv_7h2k9m4p1q8r3s6t0v5w';
const inbound = { messageId: 'msg_1q2w3e4r5t6y7u8i9o0p', conversationId, direction: 'inbound' as const, channel: 'whatsapp', type: 'text' as const, text: 'Can I check in early?', createdAt: at, source: 'channel' as const };
const outbound = {
  messageId: 'msg_0a9s8d7f6g5h4j3k2l1z',
  conversationId,
  direction: 'outbound' as const,
  channel: 'whatsapp',
  type: 'text' as const,
  text: 'Yes, from 11:00. See you tomorrow!',
  createdAt: '2026-11-24T10:00:05.000Z',
  source: 'api' as const,
  requestEventId: 'mrq_6y5t4r3e2w1q0p9o8i7u',
  status: 'delivered' as const,
};

/** Why a reply or a reaction may be refused (send_refusal and reply_window, in conversation_replies). */
const SEND_REFUSALS = [
  { status: 400, code: 'M2M_INVALID_REQUEST', reason: 'channel_unavailable', message: 'the conversation channel is not available for sending', details: { issues: [{ path: 'path.conversationId', message: 'its channel is not available' }] } },
  { status: 409, code: 'M2M_CONFLICT', reason: 'recipient_no_consent', message: 'the contact has not given consent to be contacted' },
  { status: 409, code: 'M2M_CONFLICT', reason: 'recipient_opted_out', message: 'the contact has opted out' },
  {
    status: 409,
    code: 'M2M_CONFLICT',
    reason: 'outside_customer_service_window',
    message: "the 24-hour window after the contact's last message closed at 2026-11-25T10:00:00.000Z; start the conversation again with a template",
    details: { channel: 'whatsapp', windowHours: 24, lastInboundAt: '2026-11-24T10:00:00.000Z', windowClosedAt: '2026-11-25T10:00:00.000Z' },
  },
] as const satisfies readonly KnownError[];

/** The content of a conversation (what message.created names) and the plain-text reply (decisions 6.2). */
export const conversationContentOperations = [
  defineOperation({
    ...common,
    operationId: 'getConversation',
    sdk: 'conversations.get',
    method: 'GET',
    path: '/conversations/{conversationId}',
    summary: 'Read one conversation',
    description: 'One conversation as the inbox lists it: channel, contact, owner, unread count, needs-reply, last activity and open review or handoff. Use it after a message.created webhook, which carries only ids.',
    scopes: ['conversations:read'],
    params: ConversationParams,
    status: 200,
    response: Ref(ConversationItem),
    errors: [404],
    examples: {
      response: {
        conversationId,
        channel: 'whatsapp',
        channelId: 'chn_4f5g6h7j8k9l0z1x2c3v',
        contact: { contactId: 'ctc_9o8i7u6y5t4r3e2w1q0p', name: 'Ana Martínez', phone: '+525512345678' },
        ownerOperatorId: null,
        unreadCount: 1,
        needsReply: true,
        lastMessageAt: at,
        lastMessagePreview: inbound.text,
        openReview: false,
        openHandoff: false,
        createdAt: at,
      },
    },
    handler: (s: ConversationContentOperationServices, ctx, input) => s.conversationContent.get(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'listConversationMessages',
    sdk: 'conversations.messages.list',
    method: 'GET',
    path: '/conversations/{conversationId}/messages',
    summary: 'Messages of a conversation, newest first',
    description:
      'The messages of a conversation, newest first, optionally only inbound or outbound. Outbound messages carry requestEventId and the current delivery status of their send. Page with limit and nextCursor while hasMore is true.',
    scopes: ['conversations:read'],
    params: ConversationParams,
    query: ListMessagesQuery,
    status: 200,
    response: MessageList,
    errors: [404],
    examples: { response: { messages: [outbound, inbound], hasMore: false } },
    handler: (s: ConversationContentOperationServices, ctx, input) => s.conversationContent.listMessages(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'getConversationMessage',
    sdk: 'conversations.messages.get',
    method: 'GET',
    path: '/conversations/{conversationId}/messages/{messageId}',
    summary: 'Read one message',
    description: 'One message of a conversation: its text, direction and time; for an outbound message also requestEventId and its current delivery status. Fetch the content a message.created webhook names here.',
    scopes: ['conversations:read'],
    params: MessageParams,
    status: 200,
    response: MessageResponse,
    errors: [404],
    examples: { response: { message: inbound } },
    handler: (s: ConversationContentOperationServices, ctx, input) => s.conversationContent.getMessage(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'getMessageMedia',
    sdk: 'conversations.messages.media',
    method: 'GET',
    path: '/conversations/{conversationId}/messages/{messageId}/media',
    summary: 'Download a message\'s media',
    description:
      'The bytes of a message\'s image, audio, video, document or sticker, with their Content-Type, Content-Length and Content-Disposition: attachment. Inbound media is downloaded from the channel by a job after the message arrives: until then 409 media_pending; a download that failed (too large, wrong type, gone) is 409 media_failed with details.mediaReason. A message without media is 404. Over MCP the tool answers {contentType, sizeBytes, filename} with contentBase64 up to 1 MiB, and a note to use REST beyond.',
    scopes: ['conversations:read'],
    params: MessageParams,
    status: 200,
    response: BinaryResponse,
    errors: [
      404,
      { status: 409, code: 'M2M_CONFLICT', reason: 'media_pending', message: 'the media is still being downloaded from the channel; try again shortly' },
      { status: 409, code: 'M2M_CONFLICT', reason: 'media_failed', message: 'the media could not be downloaded from the channel (too_large)', details: { mediaReason: 'too_large' } },
    ],
    extension: true,
    examples: { response: new BinaryBody(Buffer.from('/9j/4AAQSkZJRgABAQ', 'base64'), 'image/jpeg', 'msg_1q2w3e4r5t6y7u8i9o0p.jpg') },
    handler: (s: ConversationContentOperationServices, ctx, input) => s.conversationContent.getMedia(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'replyToConversation',
    sdk: 'conversations.messages.reply',
    method: 'POST',
    path: '/conversations/{conversationId}/messages',
    summary: 'Reply with text, an attachment, or both',
    description:
      'Queues a reply in the conversation: text, a knowledge asset as an attachment (assetSourceId; text is then its caption, at most 1024 characters), or both, optionally answering one of its messages (replyToMessageId). The asset must be active, validated (validationStatus ready) and in an active folder or none (409 asset_not_eligible); its bytes are kept with the reply, so deleting the asset later does not stop it (202: queued, not delivered; follow requestEventId with getMessageRequestStatus or message.delivery.updated). Emits message.created with direction outbound, so an automatic replier that acts only on inbound events never answers itself. WhatsApp, Messenger and Instagram allow it only within 24 hours of the contact\'s last message (409 outside_customer_service_window); an opted-out contact is 409. Use a stable Idempotency-Key (for an automatic reply, the eventId of the inbound message.created).',
    scopes: ['conversations:write'],
    params: ConversationParams,
    body: ReplyBody,
    status: 202,
    response: ReplyAccepted,
    errors: [
      404,
      { status: 400, code: 'M2M_INVALID_REQUEST', message: 'body.text: a reply needs text, assetSourceId or both', details: { issues: [{ path: 'body.text', message: 'a reply needs text, assetSourceId or both' }] } },
      {
        status: 400,
        code: 'M2M_INVALID_REQUEST',
        message: 'body.text: a caption is at most 1024 characters (Unicode code points)',
        details: { issues: [{ path: 'body.text', message: 'a caption is at most 1024 characters (Unicode code points)' }] },
      },
      {
        status: 400,
        code: 'M2M_INVALID_REQUEST',
        reason: 'reply_to_not_found',
        message: 'body.replyToMessageId: no message with this id in the conversation',
        details: { issues: [{ path: 'body.replyToMessageId', message: 'no message with this id in the conversation' }] },
      },
      {
        status: 400,
        code: 'M2M_INVALID_REQUEST',
        reason: 'asset_not_found',
        message: 'body.assetSourceId: no knowledge asset with this id',
        details: { issues: [{ path: 'body.assetSourceId', message: 'no knowledge asset with this id' }] },
      },
      ...SEND_REFUSALS,
      {
        status: 409,
        code: 'M2M_CONFLICT',
        reason: 'asset_not_eligible',
        message: 'the asset cannot be attached: it must be active, validated (validationStatus ready) and in an active folder or none',
        details: { assetSourceId: 'src_5t6y7u8i9o0p1q2w3e4r', active: true, validationStatus: 'blocked' },
      },
    ],
    idempotency: { key: 'required', by: 'service' },
    hints: { destructive: true, openWorld: true },
    examples: {
      request: { text: 'Here is our parking map 🅿️', assetSourceId: 'src_5t6y7u8i9o0p1q2w3e4r', replyToMessageId: inbound.messageId },
      response: { conversationId, messageId: outbound.messageId, replyId: outbound.messageId, requestEventId: outbound.requestEventId },
    },
    handler: async (s: ConversationContentOperationServices, ctx, input) => replayable(await s.replies.reply(ctx, input)),
  }),
  defineOperation({
    ...common,
    operationId: 'reactToMessage',
    sdk: 'conversations.messages.react',
    method: 'POST',
    path: '/conversations/{conversationId}/messages/{messageId}/reactions',
    summary: 'React to a message with an emoji, or remove the reaction',
    description:
      'Queues a reaction to a message of the conversation: exactly one emoji (a ZWJ sequence, flag or skin-tone variant counts as one), or an empty emoji to remove the reaction (202: queued; follow requestEventId with getMessageRequestStatus). Same rules as a reply: WhatsApp, Messenger and Instagram only within 24 hours of the contact\'s last message (409 outside_customer_service_window); an opted-out contact is 409. Only messages that went through the channel can be reacted to: a reaction to one that did not fails its send with target_not_on_channel.',
    scopes: ['conversations:write'],
    params: MessageParams,
    body: ReactionBody,
    status: 202,
    response: ReactionAccepted,
    errors: [
      404,
      { status: 400, code: 'M2M_INVALID_REQUEST', message: 'body.emoji: must be exactly one emoji (or empty to remove the reaction)', details: { issues: [{ path: 'body.emoji', message: 'must be exactly one emoji (or empty to remove the reaction)' }] } },
      ...SEND_REFUSALS,
    ],
    extension: true,
    idempotency: { key: 'required', by: 'service' },
    hints: { destructive: true, openWorld: true },
    examples: { request: { emoji: '👍' }, response: { conversationId, messageId: inbound.messageId, requestEventId: outbound.requestEventId } },
    handler: async (s: ConversationContentOperationServices, ctx, input) => replayable(await s.replies.react(ctx, input)),
  }),
  defineOperation({
    ...common,
    operationId: 'sendTypingIndicator',
    sdk: 'conversations.typing',
    method: 'POST',
    path: '/conversations/{conversationId}/typing',
    summary: 'Show the typing indicator to the contact',
    description:
      'Queues the channel\'s typing indicator (202): WhatsApp shows it together with the read receipt of the contact\'s newest message, Messenger and Instagram typing_on, webchat its indicator. It lasts until the next message or a few seconds. Same rules as a reply: WhatsApp, Messenger and Instagram only within 24 hours of the contact\'s last message (409 outside_customer_service_window). A provider that fails it never fails this call.',
    scopes: ['conversations:write'],
    params: ConversationParams,
    status: 202,
    response: TypingAccepted,
    errors: [404, ...SEND_REFUSALS],
    extension: true,
    hints: { idempotent: true, openWorld: true },
    examples: { response: { conversationId, queued: true } },
    handler: (s: ConversationContentOperationServices, ctx, input) => s.typing.typing(ctx, input),
  }),
];
