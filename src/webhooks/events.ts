import type { Tx } from '../db/driver.js';
import { EVENT_TYPES, eventScope, isEventType, type EventData, type EventType } from '../events/types.js';
import { grantingScopes } from '../auth/scopes.js';
import { newId } from '../ids.js';
import { outboxRepo } from './repo.js';

// Event types, their read scopes and payloads are declared in src/events/types.ts.
export { EVENT_TYPES, eventScope, type EventType };
export const SCHEMA_VERSION = '1.0';
export const WEBHOOKS_CHANNEL = 'webhooks';

export function requiredScopesFor(events: readonly string[]): string[] {
  return [...new Set(events.filter(isEventType).map(eventScope))];
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
export function emit<T extends EventType>(tx: Tx, now: Date, tenantId: string, type: T, data: EventData<T>): Promise<EmittedEvent> {
  return emitUnchecked(tx, now, tenantId, type, data);
}

/** emit() without the payload's type: only for the admin API's test events, whose `data` is the caller's. */
export async function emitUnchecked(tx: Tx, now: Date, tenantId: string, type: EventType, data: unknown): Promise<EmittedEvent> {
  const event = anyEventRecord(now, tenantId, type, data);
  // The outbox row and its fan-out, in one statement (webhook_emit: src/webhooks/sql/webhook_emit.sql): subscriptions
  // whose owning key is in force and holds one of these scopes (api_key_grants) get a delivery.
  const deliveries = await outboxRepo.emit(tx, { tenantId, type, now, ...event });
  if (deliveries > 0) tx.notify(WEBHOOKS_CHANNEL);
  return { eventId: event.eventId, deliveries };
}

/** An event as the outbox stores it, for a statement that emits it itself (webhook_emit inside outbound_queue). */
export interface EventRecord {
  eventId: string;
  /** The delivered body, exactly as signed. */
  body: string;
  /** The scopes of which the subscription's owning key must hold one (the event's read scope, or its write scope). */
  readScope: string;
  writeScope: string;
}

export function eventRecord<T extends EventType>(now: Date, tenantId: string, type: T, data: EventData<T>): EventRecord {
  return anyEventRecord(now, tenantId, type, data);
}

function anyEventRecord(now: Date, tenantId: string, type: EventType, data: unknown): EventRecord {
  const eventId = newId('evt');
  const body = JSON.stringify({ eventId, type, schemaVersion: SCHEMA_VERSION, tenantId, occurredAt: now.toISOString(), data });
  const [readScope, writeScope] = grantingScopes(eventScope(type));
  return { eventId, body, readScope, writeScope: writeScope ?? readScope };
}
