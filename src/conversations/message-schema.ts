import { Type } from 'typebox';
import { DateTime, Ref, Strict, StringEnum } from '../http/schemas.js';
import { StatusEnum } from '../messaging/schema.js';
import { ConversationParams } from './schema.js';
import { MESSAGE_TYPES } from '../events/types.js';

export const DIRECTIONS = ['inbound', 'outbound'] as const;
export const MAX_REPLY_LENGTH = 4096;

export const MessageParams = Type.Object(
  { ...ConversationParams.properties, messageId: Type.String({ minLength: 1, maxLength: 200 }) },
  Strict,
);

export const ListMessagesQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 25 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
    direction: Type.Optional(StringEnum(DIRECTIONS, { description: 'inbound or outbound; omit for both' })),
  },
  Strict,
);

export const Message = Type.Object(
  {
    messageId: Type.String(),
    conversationId: Type.String(),
    direction: StringEnum(DIRECTIONS),
    channel: Type.String(),
    type: StringEnum(MESSAGE_TYPES),
    text: Type.Optional(Type.String({ description: 'The body or caption; absent when there is none' })),
    createdAt: DateTime,
    source: StringEnum(['channel', 'api', 'automation', 'lifecycle', 'external'], { description: 'channel for every inbound message' }),
    media: Type.Optional(
      Type.Object(
        {
          contentType: Type.String(),
          sizeBytes: Type.Optional(Type.Integer({ minimum: 0 })),
          filename: Type.Optional(Type.String()),
          status: StringEnum(['pending', 'ready', 'failed']),
          reason: Type.Optional(Type.String({ description: 'failed: why (too_large, content_type, not_found, http_error, unreachable, timeout, or the provider error code)' })),
        },
        { additionalProperties: false },
      ),
    ),
    location: Type.Optional(
      Type.Object(
        { latitude: Type.Number(), longitude: Type.Number(), name: Type.Optional(Type.String()), address: Type.Optional(Type.String()) },
        { additionalProperties: false },
      ),
    ),
    interactive: Type.Optional(
      Type.Object({ kind: StringEnum(['button_reply', 'list_reply']), id: Type.String(), title: Type.String() }, { additionalProperties: false }),
    ),
    reaction: Type.Optional(
      Type.Object(
        { emoji: Type.String({ description: 'Empty: the reaction was removed' }), targetMessageId: Type.Optional(Type.String()) },
        { additionalProperties: false },
      ),
    ),
    replyToMessageId: Type.Optional(Type.String()),
    requestEventId: Type.Optional(Type.String({ description: 'Outbound messages: the send, as in getMessageRequestStatus' })),
    status: Type.Optional(StatusEnum),
    readAt: Type.Optional(DateTime),
  },
  { $id: 'Message', additionalProperties: false },
);

export const MessageList = Type.Object(
  { messages: Type.Array(Ref(Message)), nextCursor: Type.Optional(Type.String()), hasMore: Type.Boolean() },
  { additionalProperties: false },
);

export const MessageResponse = Type.Object({ message: Ref(Message) }, { additionalProperties: false });

export const ReplyBody = Type.Object(
  {
    text: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_REPLY_LENGTH, description: 'The message, or with assetSourceId its caption (at most 1024); limits count Unicode code points' }),
    ),
    assetSourceId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 128, description: 'A knowledge asset to attach: active, validationStatus ready, and in an active folder or none (else 409 asset_not_eligible)' }),
    ),
    replyToMessageId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'A message of this conversation this reply answers (shown quoted where the channel supports it)' })),
  },
  { ...Strict, description: 'At least one of text and assetSourceId' },
);

export const ReactionBody = Type.Object(
  { emoji: Type.String({ maxLength: 32, description: 'Exactly one emoji (a ZWJ sequence, flag or skin-tone variant counts as one); empty removes the reaction' }) },
  Strict,
);

export const ReactionAccepted = Type.Object(
  { conversationId: Type.String(), messageId: Type.String({ description: 'The message reacted to' }), requestEventId: Type.String() },
  { additionalProperties: false, description: 'Queued, not delivered: follow requestEventId with getMessageRequestStatus' },
);

export const ReplyAccepted = Type.Object(
  { conversationId: Type.String(), messageId: Type.String(), replyId: Type.String(), requestEventId: Type.String() },
  { additionalProperties: false, description: 'Queued, not delivered; replyId is the messageId' },
);

export const messageSharedSchemas = [Message];

export const TypingAccepted = Type.Object(
  { conversationId: Type.String(), queued: Type.Literal(true) },
  { additionalProperties: false, description: 'The typing indicator is queued for the channel' },
);
