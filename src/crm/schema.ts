import { Type } from 'typebox';
import { DateTime, Ref, Strict, StringEnum } from '../http/schemas.js';
import { REASON_CODES } from './views.js';

export const FOLLOW_UP_STATUSES = ['pending', 'scheduled', 'sending', 'sent', 'dismissed', 'canceled', 'expired', 'failed'] as const;

export const FollowUpParams = Type.Object({ followUpId: Type.String({ minLength: 1, maxLength: 200 }) }, Strict);

export const FollowUp = Type.Object(
  {
    followUpId: Type.String(),
    leadId: Type.String(),
    status: StringEnum(FOLLOW_UP_STATUSES),
    mode: StringEnum(['draft', 'auto']),
    opportunityId: Type.Optional(Type.String()),
    conversationId: Type.String(),
    channel: Type.String(),
    reasonCode: Type.String(),
    reasonText: Type.Optional(Type.String()),
    reason: Type.String(),
    messageDraft: Type.Optional(Type.String()),
    draftStatus: StringEnum(['empty', 'generated', 'edited']),
    dueAt: Type.Optional(DateTime),
    expiresAt: DateTime,
    sentAt: Type.Optional(DateTime),
    replyId: Type.Optional(Type.String()),
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { $id: 'FollowUp', additionalProperties: false },
);
const followUpRef = Ref(FollowUp);

export const FollowUpEnvelope = Type.Object({ followUp: followUpRef }, { additionalProperties: false });

export const ListFollowUpsQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(FOLLOW_UP_STATUSES)),
    mode: Type.Optional(StringEnum(['draft', 'auto'])),
    leadId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    conversationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    dueAfter: Type.Optional(DateTime),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  },
  Strict,
);

export const FollowUpList = Type.Object(
  { followUps: Type.Array(followUpRef), nextCursor: Type.Optional(Type.String()), hasMore: Type.Boolean() },
  { additionalProperties: false },
);

export const CreateFollowUpBody = Type.Object(
  {
    leadId: Type.String({ minLength: 1, maxLength: 200 }),
    conversationId: Type.String({ minLength: 1, maxLength: 200 }),
    dueAt: Type.Optional(DateTime),
    messageDraft: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    reasonCode: Type.Optional(StringEnum(REASON_CODES)),
    reasonText: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
  },
  Strict,
);

export const PatchFollowUpBody = Type.Object(
  { messageDraft: Type.Optional(Type.String({ maxLength: 4096 })), dueAt: Type.Optional(Type.Union([DateTime, Type.Null()])) },
  { ...Strict, minProperties: 1 },
);

export const CloseBody = Type.Object({ feedbackReason: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })) }, Strict);
export const SendBody = Type.Object({ messageText: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })) }, Strict);

export const SendAccepted = Type.Object(
  {
    followUp: followUpRef,
    reply: Type.Object(
      { replyId: Type.String(), requestEventId: Type.String(), conversationId: Type.String(), status: Type.Literal('queued') },
      { additionalProperties: false },
    ),
    crmStatusUpdateFailed: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const QuietHours = Type.Object({ start: Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$' }), end: Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$' }) }, Strict);

export const Settings = Type.Object(
  {
    followUpMode: StringEnum(['off', 'draft', 'auto']),
    followUpLevel: StringEnum(['light', 'balanced', 'proactive']),
    followUpInstructions: Type.Optional(Type.String()),
    quietHours: Type.Optional(Type.Object({ start: Type.String(), end: Type.String() }, { additionalProperties: false })),
    timezone: Type.String(),
    salesAvailable: Type.Boolean(),
    salesPublished: Type.Boolean(),
  },
  { additionalProperties: false },
);

export const PatchSettingsBody = Type.Object(
  {
    followUpMode: Type.Optional(StringEnum(['off', 'draft', 'auto'])),
    followUpLevel: Type.Optional(StringEnum(['light', 'balanced', 'proactive'])),
    followUpInstructions: Type.Optional(Type.String({ maxLength: 2000 })),
    quietHours: Type.Optional(Type.Union([QuietHours, Type.Null()])),
  },
  { ...Strict, minProperties: 1 },
);

export const crmSharedSchemas = [FollowUp];

const Limit = Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 }));
const Cursor = Type.Optional(Type.String({ minLength: 1, maxLength: 400 }));
const IdFilter = Type.Optional(Type.String({ minLength: 1, maxLength: 200 }));

export const LeadParams = Type.Object({ leadId: Type.String({ minLength: 1, maxLength: 200 }) }, Strict);
export const OpportunityParams = Type.Object({ opportunityId: Type.String({ minLength: 1, maxLength: 200 }) }, Strict);

export const Lead = Type.Object(
  {
    leadId: Type.String(),
    name: Type.String(),
    phone: Type.Optional(Type.String({ description: 'E.164' })),
    conversationId: Type.Optional(Type.String()),
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { $id: 'Lead', additionalProperties: false },
);

export const Opportunity = Type.Object(
  {
    opportunityId: Type.String(),
    leadId: Type.String(),
    conversationId: Type.Optional(Type.String()),
    stage: Type.String(),
    status: Type.String(),
    revision: Type.Integer({ minimum: 1 }),
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { $id: 'Opportunity', additionalProperties: false },
);

export const ListLeadsQuery = Type.Object(
  { conversationId: IdFilter, phone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'International number, matched in E.164 form' })), limit: Limit, cursor: Cursor },
  Strict,
);

export const ListOpportunitiesQuery = Type.Object(
  {
    leadId: IdFilter,
    conversationId: IdFilter,
    stage: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
    status: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
    limit: Limit,
    cursor: Cursor,
  },
  Strict,
);

export const LeadList = Type.Object({ leads: Type.Array(Ref(Lead)), nextCursor: Type.Optional(Type.String()), hasMore: Type.Boolean() }, { additionalProperties: false });
export const LeadEnvelope = Type.Object({ lead: Ref(Lead) }, { additionalProperties: false });
export const OpportunityList = Type.Object(
  { opportunities: Type.Array(Ref(Opportunity)), nextCursor: Type.Optional(Type.String()), hasMore: Type.Boolean() },
  { additionalProperties: false },
);
export const OpportunityEnvelope = Type.Object({ opportunity: Ref(Opportunity) }, { additionalProperties: false });

export const salesSharedSchemas = [Lead, Opportunity];
