import type { Tx } from '../db/driver.js';
import { newId } from '../ids.js';

/** Every event type and the read scope a subscriber's key needs to receive it. */
export const EVENT_SCOPES = {
  'message.created': 'conversations:read',
  'message.delivery.updated': 'messages:read',
  'conversation.handoff.updated': 'conversations:read',
  'crm.opportunity.created': 'crm:sales:read',
  'crm.opportunity.updated': 'crm:sales:read',
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
  // One statement: the outbox row and its fan-out (the deliveries' foreign key is checked at statement end).
  const rows = await tx.query<{ count: number }>(
    `WITH event AS (
       INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at) VALUES ($2, $1, $3, $4, $7, $4)
     ), inserted AS (
       INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, next_attempt_at, created_at, updated_at)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), s.tenant_id, $2, $3, s.id, 'pending', $4, $4, $4
       FROM webhook_subscriptions s
       JOIN api_keys k ON k.id = s.owner_api_key_id
       WHERE s.tenant_id = $1 AND s.active AND s.deleted_at IS NULL AND $3 = ANY (s.events)
         AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $4)
         AND ($5 = ANY (k.scopes) OR $6 = ANY (k.scopes))
       RETURNING 1)
     SELECT count(*)::int AS count FROM inserted`,
    [tenantId, eventId, type, now, scope, scope.replace(/:read$/, ':write'), body],
  );
  const deliveries = rows[0]?.count ?? 0;
  if (deliveries > 0) tx.notify(WEBHOOKS_CHANNEL);
  return { eventId, deliveries };
}
