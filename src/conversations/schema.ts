import { Type } from 'typebox';
import { DateTime, Ref, Strict, StringEnum } from '../http/schemas.js';
import { CHANNEL_FILTERS, REVIEW_REASONS, SEARCH_COUNT_CAP } from './constants.js';

const OperatorRef = Type.String({ minLength: 1, maxLength: 120 });

export const ConversationParams = Type.Object({ conversationId: Type.String({ minLength: 1, maxLength: 200 }) }, Strict);

export const ListConversationsQuery = Type.Object(
  {
    contactQuery: Type.Optional(Type.String({ minLength: 2, maxLength: 200, description: 'Dashboard contact search: name, phone digits or handle' })),
    channel: Type.Optional(StringEnum(CHANNEL_FILTERS, { default: 'all' })),
    owner: Type.Optional(
      Type.String({
        pattern: '^(all|[0-9a-f]{24})$',
        description: 'all, or the 24-character id of an active operator',
        'x-unsupported': { mine: 'mine is not supported for API keys; pass all or an operator id' },
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 25 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  },
  Strict,
);

export const ConversationItem = Type.Object(
  {
    conversationId: Type.String(),
    channel: Type.String(),
    channelId: Type.String(),
    contact: Type.Object({ contactId: Type.String(), name: Type.Optional(Type.String()), phone: Type.Optional(Type.String()) }, { additionalProperties: false }),
    ownerOperatorId: Type.Union([Type.String(), Type.Null()]),
    unreadCount: Type.Integer(),
    needsReply: Type.Boolean(),
    lastMessageAt: DateTime,
    lastMessagePreview: Type.Optional(Type.String()),
    openReview: Type.Boolean(),
    openHandoff: Type.Boolean(),
    createdAt: DateTime,
  },
  { $id: 'Conversation', additionalProperties: false },
);

export const ConversationList = Type.Object(
  {
    conversations: Type.Array(Ref(ConversationItem)),
    nextCursor: Type.Optional(Type.String()),
    hasMore: Type.Boolean(),
    inboxCounts: Type.Object({ total: Type.Integer(), unread: Type.Integer(), needsReply: Type.Integer() }, { additionalProperties: false }),
    inboxCountsCapped: Type.Optional(
      Type.Literal(true, {
        description: `Present when a contactQuery matched more than ${SEARCH_COUNT_CAP} conversations: inboxCounts then describe the ${SEARCH_COUNT_CAP} most recently active matches (total is ${SEARCH_COUNT_CAP}; unread and needsReply are lower bounds)`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const OperatorList = Type.Object(
  {
    operators: Type.Array(
      Type.Object({ operatorId: Type.String(), displayName: Type.String(), email: Type.String() }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);

export const MarkReadResult = Type.Object(
  {
    ok: Type.Boolean(),
    conversationId: Type.String(),
    unreadCountBefore: Type.Integer(),
    unreadCountAfter: Type.Integer(),
    readAt: DateTime,
    changed: Type.Boolean(),
    readByOperatorId: Type.Optional(Type.String()),
    readByOperatorName: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

export const NeedsReplyResult = Type.Object(
  {
    ok: Type.Boolean(),
    conversationId: Type.String(),
    unreadCountBefore: Type.Integer(),
    unreadCountAfter: Type.Integer(),
    needsReplyBefore: Type.Boolean(),
    needsReplyAfter: Type.Boolean(),
    resolvedAt: DateTime,
    changed: Type.Boolean(),
    needsReplyReasonBefore: Type.Optional(Type.String()),
    needsReplyDetailBefore: Type.Optional(Type.String()),
    needsReplyReasonAfter: Type.Optional(Type.String()),
    needsReplyDetailAfter: Type.Optional(Type.String()),
    resolvedInboundEventId: Type.Optional(Type.String()),
    resolutionKind: Type.Literal('obligation_acknowledged'),
  },
  { additionalProperties: false },
);

export const ReviewReason = StringEnum(REVIEW_REASONS);

export const OpenReviewBody = Type.Object(
  {
    reasonCode: Type.Optional(ReviewReason),
    note: Type.Optional(Type.String({ maxLength: 2000 })),
    assignedOperatorId: Type.Optional(OperatorRef),
  },
  Strict,
);

export const AssignReviewBody = Type.Object({ operatorId: Type.Union([OperatorRef, Type.Null()]) }, Strict);
export const ResolveReviewBody = Type.Object({ resolutionNote: Type.Optional(Type.String({ maxLength: 2000 })) }, Strict);

export const ReviewCase = Type.Object(
  {
    ok: Type.Boolean(),
    conversationId: Type.String(),
    reviewCaseId: Type.String(),
    status: StringEnum(['requested', 'resolved']),
    reasonCode: ReviewReason,
    requestedByOperatorId: Type.String(),
    requestedByOperatorName: Type.String(),
    requestedAt: DateTime,
    note: Type.Optional(Type.String()),
    assignedOperatorId: Type.Optional(Type.String()),
    assignedOperatorName: Type.Optional(Type.String()),
    resolvedAt: Type.Optional(DateTime),
    resolutionNote: Type.Optional(Type.String()),
  },
  { $id: 'ReviewCase', additionalProperties: false },
);

export const conversationSharedSchemas = [ConversationItem, ReviewCase];

/** A review case as a response body. */
export const ReviewCaseResponse = Ref(ReviewCase);
