import type { Queryable } from '../../db/driver.js';
import type { ChannelRow } from '../repo.js';

/** The SQL of webchat (decisions 7.3): sessions, the visitors' event streams and the files sent to them. */

/** Notified by every commit that adds to a visitor's stream (every node listens, through the hub). */
export const WEBCHAT_CHANNEL = 'webchat';

export interface SessionRow {
  id: string;
  tenant_id: string;
  channel_id: string;
  widget_id: string;
  name: string | null;
  conversation_id: string | null;
  created_at: Date;
  last_seen_at: Date;
}

export type WebchatEventKind = 'message' | 'typing' | 'read' | 'reaction';

export interface WebchatEventRow {
  id: string;
  kind: WebchatEventKind;
  data: Record<string, unknown>;
  created_at: Date;
}

/** An event as the hub reads it for every stream of the process (see newSince). */
export interface HubEventRow extends WebchatEventRow {
  visitor_id: string;
  prev_id: string | null;
}

export interface MediaRow {
  id: string;
  widget_id: string;
  content_type: string;
  filename: string;
  bytes: Uint8Array;
}

/** One minute: the window of the per-session message limit. */
const RATE_WINDOW_MS = 60_000;

export const webchatRepo = {
  async insertSession(db: Queryable, row: { id: string; tenantId: string; channelId: string; widgetId: string; name: string | null; now: Date }): Promise<void> {
    await db.query(
      `INSERT INTO webchat_sessions (id, tenant_id, channel_id, widget_id, name, created_at, last_seen_at, rate_window_start, rate_count)
       VALUES ($1, $2, $3, $4, $5, $6, $6, $6, 0)`,
      [row.id, row.tenantId, row.channelId, row.widgetId, row.name, row.now],
    );
  },

  async session(db: Queryable, visitorId: string, widgetId: string): Promise<SessionRow | undefined> {
    const rows = await db.query<SessionRow>(
      `SELECT id, tenant_id, channel_id, widget_id, name, conversation_id, created_at, last_seen_at FROM webchat_sessions WHERE id = $1 AND widget_id = $2`,
      [visitorId, widgetId],
    );
    return rows[0];
  },

  /**
   * A session and the webchat channel of its widget (the channel its widget id names now, whatever it is), in one
   * read: every visitor request authenticates with it.
   */
  async sessionWithChannel(db: Queryable, visitorId: string, widgetId: string): Promise<{ session: SessionRow; channel: ChannelRow | undefined } | undefined> {
    const rows = await db.query<Partial<ChannelRow> & { s_id: string; s_tenant_id: string; s_channel_id: string; s_widget_id: string; s_name: string | null; s_conversation_id: string | null; s_created_at: Date; s_last_seen_at: Date }>(
      `SELECT s.id AS s_id, s.tenant_id AS s_tenant_id, s.channel_id AS s_channel_id, s.widget_id AS s_widget_id, s.name AS s_name,
         s.conversation_id AS s_conversation_id, s.created_at AS s_created_at, s.last_seen_at AS s_last_seen_at, c.*
       FROM webchat_sessions s LEFT JOIN channels c ON c.provider = 'webchat' AND c.provider_ref = s.widget_id
       WHERE s.id = $1 AND s.widget_id = $2`,
      [visitorId, widgetId],
    );
    const row = rows[0];
    if (!row) return undefined;
    const { s_id, s_tenant_id, s_channel_id, s_widget_id, s_name, s_conversation_id, s_created_at, s_last_seen_at, ...channel } = row;
    const session: SessionRow = { id: s_id, tenant_id: s_tenant_id, channel_id: s_channel_id, widget_id: s_widget_id, name: s_name, conversation_id: s_conversation_id, created_at: s_created_at, last_seen_at: s_last_seen_at };
    return { session, channel: isChannel(channel) ? channel : undefined };
  },

  /** Marks the session used; written at most once a minute per session so reads stay reads. */
  async touch(db: Queryable, visitorId: string, now: Date): Promise<void> {
    await db.query(`UPDATE webchat_sessions SET last_seen_at = $2 WHERE id = $1 AND last_seen_at < $3`, [visitorId, now, new Date(now.getTime() - 60_000)]);
  },

  /**
   * Counts one message in the session's current minute (a fixed window, shared by every node), marks the session
   * used and takes the visitor's stream lock for the rest of the transaction (webchat_lock_visitor:
   * src/channels/sql/webchat_lock_visitor.sql), after the session row's lock: a visitor's message is the one writer
   * that takes both, always in this order. Answers the count in the window and when the window started; undefined
   * when the session is gone (nothing locked).
   */
  async countMessageAndLock(db: Queryable, visitorId: string, now: Date): Promise<{ count: number; windowStart: Date } | undefined> {
    const rows = await db.query<{ rate_count: number; rate_window_start: Date }>(
      `UPDATE webchat_sessions
       SET rate_count = CASE WHEN rate_window_start > $3 THEN rate_count + 1 ELSE 1 END,
           rate_window_start = CASE WHEN rate_window_start > $3 THEN rate_window_start ELSE $2 END,
           last_seen_at = $2
       WHERE id = $1 RETURNING rate_count, rate_window_start, webchat_lock_visitor(id)::text AS locked`,
      [visitorId, now, new Date(now.getTime() - RATE_WINDOW_MS)],
    );
    return rows[0] ? { count: rows[0].rate_count, windowStart: rows[0].rate_window_start } : undefined;
  },

  /**
   * Adds events to a visitor's stream in one statement committed on its own (webchat_events_write:
   * src/channels/sql/webchat_events_write.sql), notifying `notifyName` at commit. The new ids in order, or undefined
   * when the visitor has no session on this widget (nothing written).
   */
  async writeEvents(db: Queryable, write: { visitorId: string; widgetId: string; events: ReadonlyArray<{ kind: WebchatEventKind; data: Record<string, unknown> }>; now: Date; notifyName: string }): Promise<string[] | undefined> {
    const rows = await db.query<{ id: string }>('SELECT id FROM webchat_events_write($1, $2, $3::jsonb, $4, $5)', [
      write.visitorId,
      write.widgetId,
      JSON.stringify(write.events),
      write.now,
      write.notifyName,
    ]);
    return rows.length > 0 ? rows.map((row) => row.id) : undefined;
  },

  /**
   * A visitor's own message on its stream, in one statement with the session's link to the conversation (kept to
   * the conversation the message went to). Under the visitor's lock (countMessageAndLock).
   */
  async insertVisitorMessage(db: Queryable, row: { tenantId: string; widgetId: string; visitorId: string; conversationId: string; data: Record<string, unknown>; now: Date }): Promise<string> {
    const rows = await db.query<{ id: string }>(
      `WITH linked AS (UPDATE webchat_sessions SET conversation_id = $6 WHERE id = $3 AND conversation_id IS DISTINCT FROM $6)
       INSERT INTO webchat_events (tenant_id, widget_id, visitor_id, kind, data, created_at) VALUES ($1, $2, $3, 'message', $4, $5) RETURNING id::text AS id`,
      [row.tenantId, row.widgetId, row.visitorId, JSON.stringify(row.data), row.now, row.conversationId],
    );
    return rows[0].id;
  },

  async eventsAfter(db: Queryable, visitorId: string, widgetId: string, after: string, limit: number, kinds?: readonly WebchatEventKind[]): Promise<WebchatEventRow[]> {
    return db.query<WebchatEventRow>(
      `SELECT id::text AS id, kind, data, created_at FROM webchat_events
       WHERE visitor_id = $1 AND widget_id = $2 AND id > $3::bigint AND ($5::text[] IS NULL OR kind = ANY ($5::text[]))
       ORDER BY id LIMIT $4`,
      [visitorId, widgetId, after, limit, kinds ? [...kinds] : null],
    );
  },

  /**
   * The hub's read: events after `after`, and the ids it still waits for (seen missing, maybe committing late), each
   * with the id of its visitor's event before it (`prev_id`, committed before it: see webchat_lock_visitor), so that a stream
   * that has written up to that id can write the event as it is, without reading its own rows again.
   */
  async newSince(db: Queryable, after: string, waiting: readonly string[], limit: number): Promise<HubEventRow[]> {
    return db.query<HubEventRow>(
      `SELECT e.id::text AS id, e.visitor_id, e.kind, e.data, e.created_at,
         (SELECT max(p.id) FROM webchat_events p WHERE p.visitor_id = e.visitor_id AND p.id < e.id)::text AS prev_id
       FROM webchat_events e WHERE e.id > $1::bigint OR e.id = ANY ($2::bigint[]) ORDER BY e.id LIMIT $3`,
      [after, [...waiting], limit],
    );
  },

  async latestId(db: Queryable): Promise<string> {
    const rows = await db.query<{ id: string | null }>(`SELECT max(id)::text AS id FROM webchat_events`);
    return rows[0]?.id ?? '0';
  },

  async latestEventId(db: Queryable, visitorId: string, widgetId: string): Promise<string> {
    const rows = await db.query<{ id: string | null }>(`SELECT max(id)::text AS id FROM webchat_events WHERE visitor_id = $1 AND widget_id = $2`, [visitorId, widgetId]);
    return rows[0]?.id ?? '0';
  },

  /** True when some webchat channel allows `origin` (CORS preflights name no widget). */
  async originAllowedAnywhere(db: Queryable, origin: string): Promise<boolean> {
    const rows = await db.query(
      `SELECT 1 FROM channels WHERE provider = 'webchat' AND connection -> 'allowedOrigins' @> jsonb_build_array($1::text) LIMIT 1`,
      [origin],
    );
    return rows.length > 0;
  },

  /**
   * Retention: typing indicators after a day (they only matter live); sessions idle past `idleBefore` (their tokens
   * are dead, so nobody can read their streams any more) with their events; files no remaining event names.
   */
  async purge(db: Queryable, now: Date, idleBefore: Date): Promise<number> {
    const typing = await db.query(`DELETE FROM webchat_events WHERE kind = 'typing' AND created_at < $1 RETURNING 1`, [new Date(now.getTime() - 24 * 3_600_000)]);
    const sessions = await db.query<{ id: string }>(`DELETE FROM webchat_sessions WHERE last_seen_at < $1 RETURNING id`, [idleBefore]);
    let events: unknown[] = [];
    if (sessions.length > 0) events = await db.query(`DELETE FROM webchat_events WHERE visitor_id = ANY ($1::text[]) RETURNING 1`, [sessions.map((s) => s.id)]);
    const media = await db.query(
      `DELETE FROM webchat_media m WHERE m.created_at < $1
         AND NOT EXISTS (SELECT 1 FROM webchat_events e WHERE e.kind = 'message' AND e.data -> 'attachment' ->> 'mediaId' = m.id) RETURNING 1`,
      [new Date(now.getTime() - 24 * 3_600_000)],
    );
    return typing.length + sessions.length + events.length + media.length;
  },

  async insertMedia(db: Queryable, row: { id: string; widgetId: string; contentType: string; filename: string; bytes: Uint8Array; now: Date }): Promise<void> {
    await db.query(`INSERT INTO webchat_media (id, widget_id, content_type, filename, bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6)`, [
      row.id,
      row.widgetId,
      row.contentType,
      row.filename,
      row.bytes,
      row.now,
    ]);
  },

  async media(db: Queryable, id: string, widgetId: string): Promise<MediaRow | undefined> {
    const rows = await db.query<MediaRow>(`SELECT id, widget_id, content_type, filename, bytes FROM webchat_media WHERE id = $1 AND widget_id = $2`, [id, widgetId]);
    return rows[0];
  },

  /** Whether a file went to this visitor (a message event of its stream names it). */
  async mediaSentTo(db: Queryable, visitorId: string, widgetId: string, mediaId: string): Promise<boolean> {
    const rows = await db.query(
      `SELECT 1 FROM webchat_events WHERE visitor_id = $1 AND widget_id = $2 AND kind = 'message' AND data -> 'attachment' ->> 'mediaId' = $3 LIMIT 1`,
      [visitorId, widgetId, mediaId],
    );
    return rows.length > 0;
  },
};

/** A joined channel is there when its key is (a LEFT JOIN that found none gives nulls). */
function isChannel(row: Partial<ChannelRow>): row is ChannelRow {
  return typeof row.id === 'string';
}
