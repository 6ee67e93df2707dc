import type { Static } from 'typebox';
import { insufficientScope } from '../auth/keys.js';
import { hasScope } from '../auth/scopes.js';
import type { Clock } from '../clock.js';
import { actingKey, type Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { DomainError, invalid, notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { JsonText } from '../platform/json-text.js';
import { SCHEMA_VERSION } from '../webhooks/events.js';
import { eventRepo, type FeedPosition } from './repo.js';
import type { EventList, EventListQuery, EventParams, EventResponse } from './schema.js';
import { EVENT_DEFINITIONS, EVENT_READ_SCOPES, EVENT_TYPES, eventScope, isEventType, type EventType } from './types.js';

/** Events are kept (and listed) for 30 days. */
export const EVENT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
const PURGE_BATCH = 1_000;
const START: FeedPosition = { x: '0', s: 0 };

/*
 * A stored body is the exact JSON emit() wrote and receivers got: an EventEnvelope with its fields in the
 * schema's order, as the response serializer would write it. Responses splice it in as it is.
 */

function listJson(bodies: string, nextCursor: string, hasMore: boolean): JsonText<Static<typeof EventList>> {
  return new JsonText(`{"events":[${bodies}],"nextCursor":${JSON.stringify(nextCursor)},"hasMore":${hasMore}}`);
}

function eventJson(body: string): JsonText<Static<typeof EventResponse>> {
  return new JsonText(`{"event":${body}}`);
}

function later(a: FeedPosition, b: FeedPosition): FeedPosition {
  const ax = BigInt(a.x);
  const bx = BigInt(b.x);
  if (ax !== bx) return ax > bx ? a : b;
  return a.s >= b.s ? a : b;
}

function validPosition(value: unknown): value is FeedPosition {
  if (typeof value !== 'object' || value === null || !('x' in value) || !('s' in value)) return false;
  return typeof value.x === 'string' && /^\d{1,20}$/.test(value.x) && typeof value.s === 'number' && Number.isSafeInteger(value.s) && value.s >= 0;
}

/** The catch-up feed (GET /events) and the event-type catalogue. */
export class EventService {
  constructor(private readonly deps: { db: Db; clock: Clock; cursors: Cursors }) {}

  /** The event types the acting key may read (every type for the admin API and the system). */
  private readable(ctx: Ctx): EventType[] {
    const key = actingKey(ctx.actor);
    return key ? EVENT_TYPES.filter((type) => hasScope(key.scopes, eventScope(type))) : [...EVENT_TYPES];
  }

  private since(): Date {
    return new Date(this.deps.clock.now().getTime() - EVENT_RETENTION_MS);
  }

  /**
   * Oldest first. The cursor is a position in the stream, always returned: when the page reaches the end of
   * what is final, it moves to the horizon (the oldest transaction in flight), so a consumer's cursor advances
   * past events it cannot see and the next page starts there.
   */
  async list(ctx: Ctx, query: Static<typeof EventListQuery>) {
    const readable = this.readable(ctx);
    const key = actingKey(ctx.actor);
    if (readable.length === 0) throw insufficientScope([...EVENT_READ_SCOPES], [...EVENT_READ_SCOPES]);
    let types: EventType[] | null = null;
    if (query.types !== undefined) {
      const names = [...new Set(query.types.split(',').map((name) => name.trim()).filter((name) => name.length > 0))];
      const unknown = names.filter((name) => !isEventType(name));
      if (names.length === 0 || unknown.length > 0) throw invalid('query.types', `unknown event types: ${unknown.join(', ') || '(none given)'}`);
      types = EVENT_TYPES.filter((type) => names.includes(type));
      const unreadable = types.filter((type) => !readable.includes(type));
      if (unreadable.length > 0 && key) {
        const required = [...new Set(types.map(eventScope))];
        throw insufficientScope(required, required.filter((scope) => !hasScope(key.scopes, scope)));
      }
    } else if (readable.length < EVENT_TYPES.length) types = readable;
    const limit = query.limit ?? 50;
    const filters = { tenantId: ctx.tenantId, types: query.types === undefined ? null : types };
    let after = START;
    if (query.cursor) {
      const position = this.deps.cursors.decode<unknown>('events', filters, query.cursor);
      if (!validPosition(position)) throw new DomainError('M2M_INVALID_CURSOR', 'cursor is invalid');
      after = position;
    }
    const page = await eventRepo.page(this.deps.db, ctx.tenantId, { after, types, since: this.since(), limit });
    // A full page ends at its last event. Otherwise it holds every event before the horizon after the cursor
    // (all of them final), and the next read starts at the horizon.
    const next = page.last ?? later(after, { x: page.horizon, s: 0 });
    return listJson(page.bodies, this.deps.cursors.encode('events', filters, next), page.hasMore);
  }

  /** Another tenant's, unknown, expired or unreadable events are all 404. */
  async get(ctx: Ctx, { eventId }: Static<typeof EventParams>) {
    const row = await eventRepo.get(this.deps.db, ctx.tenantId, eventId, this.since());
    if (!row || !isEventType(row.type) || !this.readable(ctx).includes(row.type)) throw notFound('event');
    return eventJson(row.body);
  }

  /** The catalogue of event types, from the same definitions emit() is typed by. */
  eventTypes() {
    return {
      eventTypes: EVENT_TYPES.map((type) => {
        const definition = EVENT_DEFINITIONS[type];
        const schema: Record<string, unknown> = JSON.parse(JSON.stringify(definition.data));
        return { type, description: definition.description, requiredScope: definition.scope, schemaVersion: SCHEMA_VERSION, schema };
      }),
    };
  }

  /** Retention: events past 30 days that no delivery still needs, in short batches. */
  async purgeExpired(): Promise<number> {
    const cutoff = this.since();
    let total = 0;
    for (;;) {
      const deleted = await eventRepo.purgeBatch(this.deps.db, cutoff, PURGE_BATCH);
      total += deleted;
      if (deleted < PURGE_BATCH) return total;
    }
  }
}
