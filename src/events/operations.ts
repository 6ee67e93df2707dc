import { EVENT_READ_SCOPES } from './types.js';
import { defineOperation } from '../operations/define.js';
import { EventList, EventListQuery, EventParams, EventResponse } from './schema.js';
import type { EventService } from './service.js';

/** What the event operations call. */
export interface EventOperationServices {
  events: EventService;
}

const at = '2026-11-24T10:00:00.000Z';
const event = {
  eventId: 'evt_1q2w3e4r5t6y7u8i9o0p',
  type: 'message.created',
  schemaVersion: '1.0',
  tenantId: 'ten_7h8j9k0l1z2x3c4v5b6n',
  occurredAt: at,
  data: { messageId: 'msg_4r5t6y7u8i9o0p1q2w3e', conversationId: 'cnv_9o8i7u6y5t4r3e2w1q0p', direction: 'inbound', channel: 'whatsapp', type: 'text' },
};

export const eventOperations = [
  defineOperation({
    area: 'events',
    tag: 'Events',
    operationId: 'listEvents',
    sdk: 'events.list',
    method: 'GET',
    path: '/events',
    summary: 'Follow the event stream, oldest first',
    description:
      'Every event of the business from the last 30 days, oldest first, of the types the key can read (optionally narrowed with types, a comma list; naming a type the key cannot read is 403). nextCursor is always present: store it and call again with it to get only newer events; a consumer that follows it never misses an event, even one whose transaction committed late. Use it to catch up after webhook downtime or instead of webhooks.',
    scopes: [...EVENT_READ_SCOPES],
    scopeMode: 'any',
    query: EventListQuery,
    status: 200,
    response: EventList,
    examples: { response: { events: [event], nextCursor: 'eyJsIjoiZXZlbnRzIn0.c2lnbmF0dXJl', hasMore: false } },
    handler: (s: EventOperationServices, ctx, input) => s.events.list(ctx, input),
  }),
  defineOperation({
    area: 'events',
    tag: 'Events',
    operationId: 'getEvent',
    sdk: 'events.get',
    method: 'GET',
    path: '/events/{eventId}',
    summary: 'Read one event',
    description: 'One event envelope by eventId, exactly as delivered to webhooks. Unknown, expired (over 30 days), another business’s or of a type the key cannot read: 404.',
    scopes: [...EVENT_READ_SCOPES],
    scopeMode: 'any',
    params: EventParams,
    status: 200,
    response: EventResponse,
    errors: [404],
    examples: { response: { event } },
    handler: (s: EventOperationServices, ctx, input) => s.events.get(ctx, input),
  }),
];
