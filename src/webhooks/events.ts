import type { Tx } from '../db/driver.js';
import { newId } from '../ids.js';

/** Every event type and the read scope a subscriber's key needs to receive it. */
export const EVENT_SCOPES = {
  'message.created': 'conversations:read',
  'message.delivery.updated': 'messages:read',
  'conversation.handoff.updated': 'conversations:read',
  'crm.opportunity.created': 'crm:sales:read',
  'crm.opportunity.updated': 'crm:sales:read',
  'knowledge.crawl.completed': 'knowledge:read',
  'knowledge.crawl.failed': 'knowledge:read',
} as const;

export type EventType = keyof typeof EVENT_SCOPES;
export const EVENT_TYPES = Object.keys(EVENT_SCOPES) as EventType[];
export const SCHEMA_VERSION = '1.0';
export const WEBHOOKS_CHANNEL = 'webhooks';

export function requiredScopesFor(events: readonly string[]): string[] {
  return [...new Set(events.map((type) => EVENT_SCOPES[type as EventType]).filter(Boolean))];
}

export interface EmittedEvent {
  eventId: string;
  deliveries: number;
}

/**
 * Writes an event to the outbox and fans it out to one delivery per matching active subscription of the
 * tenant, all inside the caller's transaction: the event exists exactly when the state change commits.
 * Subscriptions whose owning key is revoked, expired or lacks the event's read scope get no delivery.
 * Domains call this for customer-visible changes only; internal or tool turns emit nothing.
 */
export async function emit(tx: Tx, now: Date, tenantId: string, type: EventType, data: Record<string, unknown>): Promise<EmittedEvent> {
  const eventId = newId('evt');
  const body = JSON.stringify({ eventId, type, schemaVersion: SCHEMA_VERSION, tenantId, occurredAt: now.toISOString(), data });
  const scope = EVENT_SCOPES[type];
  // The outbox row and its fan-out, in one statement (src/db/migrations/0012_webhook_emit.sql).
  const rows = await tx.query<{ count: number }>('SELECT webhook_emit($1, $2, $3, $4, $5, $6, $7) AS count', [
    tenantId,
    eventId,
    type,
    now,
    body,
    scope,
    scope.replace(/:read$/, ':write'),
  ]);
  const deliveries = rows[0]?.count ?? 0;
  if (deliveries > 0) tx.notify(WEBHOOKS_CHANNEL);
  return { eventId, deliveries };
}
