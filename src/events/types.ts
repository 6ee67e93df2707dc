import { Type, type Static, type TSchema } from 'typebox';
import type { Scope } from '../auth/scopes.js';
import { StringEnum } from '../http/schemas.js';

/** One event type: who may read it, what it means, and the JSON Schema of its `data` (what emit() must pass). */
interface EventDefinition<S extends TSchema> {
  scope: Scope;
  description: string;
  data: S;
}

function define<S extends TSchema>(definition: EventDefinition<S>): EventDefinition<S> {
  return definition;
}

const Id = Type.String({ minLength: 1 });

/** The kinds of message (decisions 7.2), in events and in message reads. */
export const MESSAGE_TYPES = [
  'text',
  'image',
  'audio',
  'video',
  'document',
  'sticker',
  'location',
  'contacts',
  'interactive_reply',
  'reaction',
  'template',
  'unsupported',
] as const;
const Changes = Type.Object(
  { new: Type.Integer({ minimum: 0 }), changed: Type.Integer({ minimum: 0 }), removed: Type.Integer({ minimum: 0 }), same: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);
const CrawlFields = { jobId: Id, websiteId: Id, websiteGenerationId: Id };

/**
 * Every event type, its read scope and its payload. The webhook fan-out, the event feed (GET /events) and the
 * event-type catalogue (GET /webhooks/event-types) read this one table; emit() is typed from it.
 */
export const EVENT_DEFINITIONS = {
  'message.created': define({
    scope: 'conversations:read',
    description: 'A message was added to a conversation: inbound from a guest, or outbound (a start, a reply or a follow-up send, with its requestEventId).',
    data: Type.Object(
      {
        messageId: Id,
        conversationId: Id,
        direction: StringEnum(['inbound', 'outbound']),
        channel: Type.String(),
        type: StringEnum(MESSAGE_TYPES, { description: 'The kind of message (decisions 7.2)' }),
        requestEventId: Type.Optional(Id),
      },
      { additionalProperties: false },
    ),
  }),
  'message.delivery.updated': define({
    scope: 'messages:read',
    description: 'The provider status of an outbound message changed (sent, delivered, read or failed); requestEventId ties it to the send.',
    data: Type.Object(
      {
        requestEventId: Id,
        status: StringEnum(['sent', 'delivered', 'read', 'failed']),
        replyId: Id,
        conversationId: Id,
        providerMessageId: Type.Optional(Type.String()),
        errorCode: Type.Optional(Type.String()),
      },
      { additionalProperties: false },
    ),
  }),
  'conversation.handoff.updated': define({
    scope: 'conversations:read',
    description: 'A handoff to a human operator was opened, assigned or resolved.',
    data: Type.Object({ conversationId: Id, caseId: Id, action: StringEnum(['opened', 'assigned', 'resolved']) }, { additionalProperties: false }),
  }),
  'crm.opportunity.created': define({
    scope: 'crm:sales:read',
    description: 'A sales opportunity was created for a lead; conversationId when it belongs to a conversation.',
    data: Type.Object(
      { opportunityId: Id, leadId: Id, conversationId: Type.Optional(Id), revision: Type.Integer({ minimum: 1 }), stage: Type.String(), status: Type.String() },
      { additionalProperties: false },
    ),
  }),
  'crm.opportunity.updated': define({
    scope: 'crm:sales:read',
    description: 'A sales opportunity changed; `changed` names the fields that changed in this revision; conversationId when it belongs to a conversation.',
    data: Type.Object(
      {
        opportunityId: Id,
        leadId: Id,
        conversationId: Type.Optional(Id),
        revision: Type.Integer({ minimum: 1 }),
        stage: Type.String(),
        status: Type.String(),
        changed: Type.Array(Type.String()),
      },
      { additionalProperties: false },
    ),
  }),
  'knowledge.crawl.completed': define({
    scope: 'knowledge:read',
    description: 'A website crawl completed; its generation is now current. `changes` counts pages against the previous generation.',
    data: Type.Object({ ...CrawlFields, status: Type.Literal('completed'), changes: Changes }, { additionalProperties: false }),
  }),
  'knowledge.crawl.failed': define({
    scope: 'knowledge:read',
    description: 'A website crawl failed; the previous generation stays current.',
    data: Type.Object({ ...CrawlFields, status: Type.Literal('failed') }, { additionalProperties: false }),
  }),
  'webhook.subscription.disabled': define({
    scope: 'webhooks:read',
    description: 'A webhook subscription was disabled by the service (reason `failing`: every attempt failed for too long).',
    data: Type.Object({ subscriptionId: Id, reason: StringEnum(['failing']) }, { additionalProperties: false }),
  }),
} as const;

export type EventType = keyof typeof EVENT_DEFINITIONS;
/** The `data` an event of type `T` carries. */
export type EventData<T extends EventType> = Static<(typeof EVENT_DEFINITIONS)[T]['data']>;

export const EVENT_TYPES: readonly EventType[] = Object.keys(EVENT_DEFINITIONS).filter(isEventType);

export function isEventType(value: string): value is EventType {
  return Object.hasOwn(EVENT_DEFINITIONS, value);
}

export function eventScope(type: EventType): Scope {
  return EVENT_DEFINITIONS[type].scope;
}

/** Every distinct read scope of an event type, in catalogue order. */
export const EVENT_READ_SCOPES: readonly Scope[] = [...new Set(EVENT_TYPES.map(eventScope))];
