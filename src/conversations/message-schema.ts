import { Type } from 'typebox';
import { DateTime, Ref, Strict, StringEnum } from '../http/schemas.js';
import { StatusEnum } from '../messaging/schema.js';
import { ConversationParams } from './schema.js';

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
    text: Type.String(),
    createdAt: DateTime,
    requestEventId: Type.Optional(Type.String({ description: 'Outbound messages: the send, as in getMessageRequestStatus' })),
    status: Type.Optional(StatusEnum),
  },
  { $id: 'Message', additionalProperties: false },
);

export const MessageList = Type.Object(
  { messages: Type.Array(Ref(Message)), nextCursor: Type.Optional(Type.String()), hasMore: Type.Boolean() },
  { additionalProperties: false },
);

export const MessageResponse = Type.Object({ message: Ref(Message) }, { additionalProperties: false });

export const ReplyBody = Type.Object({ text: Type.String({ minLength: 1, maxLength: MAX_REPLY_LENGTH }) }, Strict);

export const ReplyAccepted = Type.Object(
  { conversationId: Type.String(), messageId: Type.String(), replyId: Type.String(), requestEventId: Type.String() },
  { additionalProperties: false, description: 'Queued, not delivered; replyId is the messageId' },
);

export const messageSharedSchemas = [Message];
