import { EVENT_DEFINITIONS, EVENT_TYPES, type EventData, type EventType } from '../events/types.js';
import { SCHEMA_VERSION } from '../webhooks/events.js';

/** A payload example per event type, typed by the same table emit() is typed by (so a changed payload fails to compile). */
const DATA_EXAMPLES: { [T in EventType]?: EventData<T> } = {
  'message.created': { messageId: 'msg_2b7c9d1e3f5a7b9c1d3e', conversationId: 'cnv_7h2k9m4p1q8r3s6t0v5w', direction: 'inbound', channel: 'whatsapp', type: 'text' },
  'message.delivery.updated': {
    requestEventId: 'req_6y5t4r3e2w1q0p9o8i7u',
    status: 'delivered',
    replyId: 'msg_0a9s8d7f6g5h4j3k2l1z',
    conversationId: 'cnv_7h2k9m4p1q8r3s6t0v5w',
    providerMessageId: 'wamid.HBgNNTIxNTUxMjM0NTY3OBUCABEYEjA5',
  },
  'conversation.handoff.updated': { conversationId: 'cnv_7h2k9m4p1q8r3s6t0v5w', caseId: 'hnd_1q2w3e4r5t6y7u8i9o0p', action: 'opened' },
  'crm.opportunity.created': { opportunityId: 'opp_9k8j7h6g5f4d3s2a1z0x', leadId: 'lead_5v6b7n8m9q0w1e2r3t4y', revision: 1, stage: 'qualified', status: 'open' },
  'crm.opportunity.updated': { opportunityId: 'opp_9k8j7h6g5f4d3s2a1z0x', leadId: 'lead_5v6b7n8m9q0w1e2r3t4y', revision: 2, stage: 'proposal', status: 'open', changed: ['stage'] },
  'knowledge.crawl.completed': {
    jobId: 'crj_3e4r5t6y7u8i9o0p1a2s',
    websiteId: 'web_8u7y6t5r4e3w2q1a0s9d',
    websiteGenerationId: 'wgn_2s3d4f5g6h7j8k9l0q1w',
    status: 'completed',
    changes: { new: 12, changed: 3, removed: 1, same: 140 },
  },
  'knowledge.crawl.failed': { jobId: 'crj_3e4r5t6y7u8i9o0p1a2s', websiteId: 'web_8u7y6t5r4e3w2q1a0s9d', websiteGenerationId: 'wgn_2s3d4f5g6h7j8k9l0q1w', status: 'failed' },
  'webhook.subscription.disabled': { subscriptionId: 'whk_8f2k1m3n4p5q6r7s8t9v', reason: 'failing' },
};

/** The JSON Schema of an event type's data, exactly as `GET /webhooks/event-types` answers it. */
export function eventDataSchema(type: EventType): Record<string, unknown> {
  return JSON.parse(JSON.stringify(EVENT_DEFINITIONS[type].data));
}

/** The example of an event type's data, when one is written. */
export function eventDataExample(type: EventType): unknown {
  return DATA_EXAMPLES[type];
}

const HEADERS = [
  { name: 'X-Service-Event-Id', in: 'header', required: true, description: 'The eventId: deduplicate on it (delivery is at least once).', schema: { type: 'string' } },
  {
    name: 'X-Service-Signature',
    in: 'header',
    required: true,
    description: '`t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of t + "." + raw body, keyed with the subscription secret>`. Verify it on the raw bytes before parsing; reject a `t` more than five minutes away.',
    schema: { type: 'string', pattern: '^t=[0-9]+,v1=[0-9a-f]{64}$' },
  },
];

function envelope(type: EventType): Record<string, unknown> {
  return {
    type: 'object',
    required: ['eventId', 'type', 'schemaVersion', 'tenantId', 'occurredAt', 'data'],
    properties: {
      eventId: { type: 'string' },
      type: { type: 'string', const: type },
      schemaVersion: { type: 'string', const: SCHEMA_VERSION },
      tenantId: { type: 'string' },
      occurredAt: { type: 'string', format: 'date-time' },
      data: eventDataSchema(type),
    },
    additionalProperties: false,
  };
}

/**
 * The OpenAPI 3.1 `webhooks` section: one signed POST per event type, its body the event envelope with that
 * type's data schema, the same schemas `GET /webhooks/event-types` answers.
 */
export function webhooksSection(): Record<string, unknown> {
  const section: Record<string, unknown> = {};
  for (const type of EVENT_TYPES) {
    const definition = EVENT_DEFINITIONS[type];
    const data = eventDataExample(type);
    const example = data === undefined ? undefined : { eventId: 'evt_4n5m6b7v8c9x0z1a2s3d', type, schemaVersion: SCHEMA_VERSION, tenantId: 'ten_1a2b3c4d5e6f7g8h9j0k', occurredAt: '2026-11-24T10:00:00.000Z', data };
    section[type] = {
      post: {
        summary: type,
        description: `${definition.description}\n\nSent to subscriptions whose events include \`${type}\` and whose owning key can read \`${definition.scope}\`; also readable from \`GET /events\`.`,
        parameters: HEADERS,
        requestBody: { required: true, content: { 'application/json': { schema: envelope(type), ...(example ? { example } : {}) } } },
        responses: {
          '2XX': { description: 'Accepted: answer once the event is stored. Any other answer, or none within 10 s, is retried.' },
        },
      },
    };
  }
  return section;
}
