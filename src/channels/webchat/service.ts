import type { Clock } from '../../clock.js';
import type { Db } from '../../db/driver.js';
import { DomainError, invalid } from '../../errors.js';
import { newId } from '../../ids.js';
import { codePointLength } from '../../util/text.js';
import { writeInbound } from '../../conversations/inbox.js';
import { channelRepo, type ChannelRow } from '../repo.js';
import { signSessionToken, verifySessionToken, webchatTokenKey } from './token.js';
import { WEBCHAT_CHANNEL, webchatRepo, type SessionRow, type WebchatEventRow } from './repo.js';
import { WebchatHub } from './hub.js';

export { WEBCHAT_CHANNEL } from './repo.js';
/** Decisions 7.3: a session token expires after 30 days without use. */
export const SESSION_IDLE_MS = 30 * 24 * 60 * 60 * 1000;
export const MAX_TEXT = 4096;
const MAX_NAME = 200;
const PAGE = 200;

/** A visitor's authenticated session with its channel. */
export interface VisitorSession {
  session: SessionRow;
  channel: ChannelRow;
}

/** One message as the visitor sees it. */
export interface VisitorMessage {
  eventId: string;
  messageId: string;
  direction: 'inbound' | 'outbound';
  type: string;
  text?: string;
  attachment?: { mediaId: string; url: string; contentType: string; filename: string; kind: string };
  replyToMessageId?: string;
  createdAt: string;
}

function forbiddenOrigin(origin: string | undefined): DomainError {
  return new DomainError('M2M_AUTH_INSUFFICIENT_SCOPE', origin ? `origin ${origin} is not allowed for this widget` : 'the Origin header is required', {
    reason: 'origin_not_allowed',
  });
}

export function visitorMessage(row: WebchatEventRow): VisitorMessage {
  const data = row.data as Omit<VisitorMessage, 'eventId'>;
  return { eventId: row.id, ...data };
}

/**
 * The visitor side of webchat (decisions 7.3): sessions, a visitor's messages in (through the shared inbound
 * write, so they raise `message.created` like any channel's) and what the visitor may read: its own stream only.
 */
export class WebchatService {
  private readonly tokenKey: Buffer;
  /** When this process last moved each channel's last inbound time (see noteInbound). */
  private readonly inboundNoted = new Map<string, number>();
  /** Wakes this process's open streams (src/channels/webchat/hub.ts). */
  readonly hub: WebchatHub;

  constructor(
    readonly db: Db,
    private readonly clock: Clock,
    signingKey: Buffer,
    private readonly ratePerMinute: number,
    onStreamError: (error: unknown) => void = () => undefined,
  ) {
    this.tokenKey = webchatTokenKey(signingKey);
    this.hub = new WebchatHub(db, onStreamError);
  }

  /** The origin must be one of the channel's allowed origins (403 otherwise, a missing Origin included). */
  checkOrigin(channel: ChannelRow, origin: string | undefined): void {
    if (!origin || !(channel.connection.allowedOrigins ?? []).includes(origin)) throw forbiddenOrigin(origin);
  }

  /** For CORS preflights, which name no widget: whether any webchat channel allows the origin. */
  async originAllowedAnywhere(origin: string): Promise<boolean> {
    return webchatRepo.originAllowedAnywhere(this.db, origin);
  }

  private async widgetChannel(widgetId: string): Promise<ChannelRow | undefined> {
    const [channel] = await channelRepo.byProviderRefs(this.db, 'webchat', [widgetId]);
    return channel && channel.provider === 'webchat' && channel.available ? channel : undefined;
  }

  async createSession(input: { widgetId: string; name?: string }, origin: string | undefined) {
    const channel = await this.widgetChannel(input.widgetId);
    if (!channel) throw new DomainError('M2M_NOT_FOUND', 'widget not found');
    this.checkOrigin(channel, origin);
    if (input.name !== undefined && codePointLength(input.name) > MAX_NAME) throw invalid('body.name', `must be at most ${MAX_NAME} characters`);
    const visitorId = newId('wcv', 24);
    await webchatRepo.insertSession(this.db, { id: visitorId, tenantId: channel.tenant_id, channelId: channel.id, widgetId: input.widgetId, name: input.name ?? null, now: this.clock.now() });
    return { sessionToken: signSessionToken(this.tokenKey, { widgetId: input.widgetId, visitorId }), visitorId };
  }

  /**
   * The session a token names: 401 when the token is missing, forged, of a removed session, or idle for 30 days;
   * 403 when the request's origin is not allowed for its widget. `originOptional`: a request without Origin passes
   * (the files of GET /media are loaded by <img> and download links, which send none; a foreign page's fetch does).
   */
  async authenticate(token: string | undefined, origin: string | undefined, options: { originOptional?: boolean } = {}): Promise<VisitorSession> {
    if (!token) throw new DomainError('M2M_AUTH_MISSING_CREDENTIALS', 'a session token is required (Authorization: Bearer <sessionToken> or ?sessionToken=)');
    const claims = verifySessionToken(this.tokenKey, token);
    const found = claims ? await webchatRepo.sessionWithChannel(this.db, claims.visitorId, claims.widgetId) : undefined;
    const now = this.clock.now();
    if (!found || now.getTime() - found.session.last_seen_at.getTime() > SESSION_IDLE_MS) {
      throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'the session token is invalid or expired; start a new session');
    }
    const { session, channel } = found;
    if (!channel || !channel.available || channel.id !== session.channel_id) {
      throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'the session token is invalid or expired; start a new session');
    }
    if (origin !== undefined || !options.originOptional) this.checkOrigin(channel, origin);
    return { session, channel };
  }

  /**
   * The channel's last inbound time, which the statement moves at most once a second: not sent again while this
   * process moved it less than a second ago (every visitor message of a widget would otherwise run it).
   */
  private async noteInbound(channelId: string, now: Date): Promise<void> {
    const last = this.inboundNoted.get(channelId);
    if (last !== undefined && now.getTime() - last < 1000 && now.getTime() >= last) return;
    this.inboundNoted.set(channelId, now.getTime());
    await channelRepo.noteInbound(this.db, [channelId], now);
  }

  async touch(visitor: VisitorSession): Promise<void> {
    await webchatRepo.touch(this.db, visitor.session.id, this.clock.now());
  }

  /**
   * A visitor's message: counted against the per-session limit (429 with the seconds until the minute ends), then
   * written as any channel's inbound message, with its event on the visitor's stream, in one transaction.
   */
  async postMessage(visitor: VisitorSession, text: string): Promise<{ messageId: string; conversationId: string } | { retryAfterSeconds: number }> {
    if (text.trim().length === 0) throw invalid('body.text', 'must not be empty');
    if (codePointLength(text) > MAX_TEXT) throw invalid('body.text', `must be at most ${MAX_TEXT} characters (Unicode code points)`);
    const now = this.clock.now();
    const { session, channel } = visitor;
    const messageId = newId('wcm', 24);
    // The count and the message commit together; a refused message commits its count alone.
    const written = await this.db.transaction(async (tx) => {
      const rate = await webchatRepo.countMessageAndLock(tx, session.id, now);
      if (!rate) throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'the session token is invalid or expired; start a new session');
      if (rate.count > this.ratePerMinute) {
        return { retryAfterSeconds: Math.max(1, Math.ceil((rate.windowStart.getTime() + 60_000 - now.getTime()) / 1000)) };
      }
      const result = await writeInbound(
        tx,
        channel,
        { contact: { handle: session.id, ...(session.name ? { name: session.name } : {}) }, text, at: now, type: 'text', source: 'channel', providerMessageId: messageId },
        now,
      );
      if (!result) throw new Error('a new webchat message id was already taken');
      const message: Omit<VisitorMessage, 'eventId'> = { messageId, direction: 'inbound', type: 'text', text, createdAt: now.toISOString() };
      await webchatRepo.insertVisitorMessage(tx, { tenantId: channel.tenant_id, widgetId: session.widget_id, visitorId: session.id, conversationId: result.conversationId, data: { ...message }, now });
      tx.notify(WEBCHAT_CHANNEL);
      return result;
    });
    if ('retryAfterSeconds' in written) return written;
    await this.noteInbound(channel.id, now);
    return { messageId, conversationId: written.conversationId };
  }

  /** The visitor's own messages after the stream event id `after` (oldest first, at most 200). */
  async messages(visitor: VisitorSession, after: string): Promise<VisitorMessage[]> {
    const rows = await webchatRepo.eventsAfter(this.db, visitor.session.id, visitor.session.widget_id, after, PAGE, ['message']);
    return rows.map(visitorMessage);
  }

  /** The maintenance job's purge (src/channels/webchat/repo.ts, purge). */
  async purgeExpired(): Promise<number> {
    const now = this.clock.now();
    return webchatRepo.purge(this.db, now, new Date(now.getTime() - SESSION_IDLE_MS));
  }

  async media(visitor: VisitorSession, mediaId: string) {
    const { session } = visitor;
    if (!(await webchatRepo.mediaSentTo(this.db, session.id, session.widget_id, mediaId))) return undefined;
    return webchatRepo.media(this.db, mediaId, session.widget_id);
  }
}
