import { queueReceipt } from '../messaging/receipt-queue.js';
import type { Clock } from '../clock.js';
import type { Db, Queryable, Tx } from '../db/driver.js';
import { DomainError, conflict, invalid, notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { newId } from '../ids.js';
import { operatorRepo } from '../tenants/repo.js';
import { iso } from '../util/time.js';
import type { Static } from 'typebox';
import type { Actor, Ctx } from '../context.js';
import { ACTIVITY_CHANNEL } from './actor.js';
import type { AssignReviewBody, ConversationParams, ListConversationsQuery, OpenReviewBody, ResolveReviewBody } from './schema.js';
import { conversationRepo, type ConversationRow } from './repo.js';
import { caseRepo } from './case-repo.js';
import { inboxSearchRepo } from './search-repo.js';
import type { ListFilter } from './search-sql.js';
import { conversationView, reviewView } from './views.js';
import { SEARCH_COUNT_CAP } from './constants.js';

export { CHANNEL_FILTERS, REVIEW_REASONS, SEARCH_COUNT_CAP } from './constants.js';


type ListQuery = Static<typeof ListConversationsQuery>;
type ConversationRef = Static<typeof ConversationParams>;

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (ch) => `\\${ch}`);
}

/** What a contact search matches: LIKE patterns over `search_text`, or the start of the contact's phone. */
export interface ContactSearch {
  /** Escaped LIKE patterns, any of which must match the name, phone digits and handle text. */
  patterns: string[];
  /** An international number as typed ("+52 55 1234"): the E.164 phones that start with it. */
  phonePrefix?: string;
}

/**
 * A contact search: the query as typed (lowercased) anywhere in name, phone digits or handle; and, when the
 * query looks like a phone number ("55 12-34"), its digits anywhere in the phone. A number typed with its
 * leading "+" is the start of an E.164 phone, so it matches phones that begin with it (and can use an
 * ordinary index: a prefix of a number shared by most contacts is slow for a trigram index).
 */
export function contactSearch(query: string | undefined): ContactSearch {
  if (query === undefined) return { patterns: [] };
  const lowered = query.trim().toLowerCase();
  const digits = lowered.replace(/\D/g, '');
  const phoneLike = /^[\d\s+().-]+$/.test(lowered) && digits.length >= 2;
  if (phoneLike && lowered.startsWith('+')) return { patterns: [], phonePrefix: `+${digits}` };
  // "(55) 1234" as typed can only ever match a phone, and phones are stored as digits: one pattern.
  if (phoneLike && /[+()]/.test(lowered)) return { patterns: [`%${digits}%`] };
  const patterns = [`%${escapeLike(lowered)}%`];
  if (phoneLike && digits !== lowered) patterns.push(`%${digits}%`);
  return { patterns };
}

/** Records an activity row and wakes the realtime stream when the transaction commits. */
export async function recordActivity(
  tx: Tx,
  row: { tenantId: string; conversationId: string; kind: string; actor: Actor | { type: 'contact'; id: string }; data?: Record<string, unknown>; now: Date },
): Promise<void> {
  await conversationRepo.insertActivity(tx, {
    tenantId: row.tenantId,
    conversationId: row.conversationId,
    kind: row.kind,
    actorType: row.actor.type,
    actorId: row.actor.id,
    data: row.data ?? {},
    now: row.now,
  });
  tx.notify(ACTIVITY_CHANNEL);
}

export async function requireConversation(db: Queryable, tenantId: string, conversationId: string, lock = false): Promise<ConversationRow> {
  const row = await conversationRepo.get(db, tenantId, conversationId, lock);
  if (!row) throw notFound('conversation');
  return row;
}

/** An active operator of the tenant, or 404 (a foreign, unknown or inactive operator looks the same). */
export async function requireActiveOperator(db: Queryable, tenantId: string, operatorId: string) {
  const operator = await operatorRepo.get(db, tenantId, operatorId);
  if (!operator || !operator.active) throw notFound('operator');
  return operator;
}

/** The conversation controls of the public API: inbox search, triage and reviews. */
export class ConversationService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly cursors: Cursors,
  ) {}

  async list(ctx: Ctx, query: ListQuery) {
    const { tenantId } = ctx;
    if (query.owner === 'mine') throw invalid('query.owner', 'mine is not supported for API keys; pass all or an operator id');
    const owner = query.owner && query.owner !== 'all' ? query.owner : undefined;
    if (owner) await requireActiveOperator(this.db, tenantId, owner);
    const filter: ListFilter = {
      tenantId,
      channel: query.channel && query.channel !== 'all' ? query.channel : undefined,
      ownerOperatorId: owner,
      ...contactSearch(query.contactQuery),
    };
    const binding = { tenantId, contactQuery: query.contactQuery ?? null, channel: filter.channel ?? 'all', owner: owner ?? 'all' };
    const after = query.cursor ? this.cursors.decode<{ at: string; id: string }>('conversations', binding, query.cursor) : undefined;
    const limit = query.limit ?? 25;
    const { rows, counts, countsCapped } = await inboxSearchRepo.listWithCounts(this.db, filter, { limit: limit + 1, after, countCap: SEARCH_COUNT_CAP });
    const { page, hasMore, next } = this.cursors.page('conversations', binding, rows, limit, (last) => ({ at: iso(last.last_message_at), id: last.id }));
    return {
      conversations: page.map(conversationView),
      ...next,
      hasMore,
      inboxCounts: counts,
      ...(countsCapped ? { inboxCountsCapped: true as const } : {}),
    };
  }

  async assignableOperators(ctx: Ctx) {
    const rows = await operatorRepo.listActive(this.db, ctx.tenantId);
    return { operators: rows.map((row) => ({ operatorId: row.id, displayName: row.display_name, email: row.email })) };
  }

  /** Zeroes the unread count; a second call changes nothing and says so. */
  async markRead(ctx: Ctx, { conversationId }: ConversationRef) {
    const { tenantId, actor } = ctx;
    return this.db.transaction(async (tx) => {
      const conversation = await requireConversation(tx, tenantId, conversationId, true);
      const now = this.clock.now();
      const changed = conversation.unread_count > 0;
      if (changed) {
        await conversationRepo.markRead(tx, tenantId, conversationId, actor.id ?? actor.type, now);
        await recordActivity(tx, { tenantId, conversationId, kind: 'conversation.read', actor, data: { unreadCountBefore: conversation.unread_count }, now });
        // The channel's read receipt for the newest inbound message (decisions 7.2): a job, so that it never fails this.
        await queueReceipt(tx, now, tenantId, conversationId, false);
      }
      return {
        ok: true,
        conversationId,
        unreadCountBefore: conversation.unread_count,
        unreadCountAfter: 0,
        readAt: now.toISOString(),
        changed,
        readByOperatorId: actor.id ?? undefined,
        readByOperatorName: actor.name,
      };
    });
  }

  /** Acknowledges the needs-reply obligation; never touches a review or a handoff. */
  async resolveNeedsReply(ctx: Ctx, { conversationId }: ConversationRef) {
    const { tenantId, actor } = ctx;
    return this.db.transaction(async (tx) => {
      const conversation = await requireConversation(tx, tenantId, conversationId, true);
      const now = this.clock.now();
      const changed = conversation.needs_reply;
      if (changed) {
        await conversationRepo.clearNeedsReply(tx, tenantId, conversationId, now);
        await recordActivity(tx, {
          tenantId,
          conversationId,
          kind: 'conversation.needs_reply_resolved',
          actor,
          data: { reason: conversation.needs_reply_reason, inboundEventId: conversation.needs_reply_event_id },
          now,
        });
      }
      return {
        ok: true,
        conversationId,
        unreadCountBefore: conversation.unread_count,
        unreadCountAfter: conversation.unread_count,
        needsReplyBefore: conversation.needs_reply,
        needsReplyAfter: false,
        resolvedAt: now.toISOString(),
        changed,
        needsReplyReasonBefore: conversation.needs_reply_reason ?? undefined,
        needsReplyDetailBefore: conversation.needs_reply_detail ?? undefined,
        needsReplyReasonAfter: undefined,
        needsReplyDetailAfter: undefined,
        resolvedInboundEventId: conversation.needs_reply_event_id ?? undefined,
        resolutionKind: 'obligation_acknowledged' as const,
      };
    });
  }

  async openReview(ctx: Ctx, { conversationId, ...input }: ConversationRef & Static<typeof OpenReviewBody>) {
    const { tenantId, actor } = ctx;
    return this.db.transaction(async (tx) => {
      const conversation = await requireConversation(tx, tenantId, conversationId, true);
      if (conversation.open_review_id || conversation.open_handoff_id) {
        throw conflict(conversation.open_review_id ? 'a review is already open for this conversation' : 'a handoff is open for this conversation', {
          openReview: conversation.open_review_id !== null,
          openHandoff: conversation.open_handoff_id !== null,
        });
      }
      if (input.assignedOperatorId) await requireActiveOperator(tx, tenantId, input.assignedOperatorId);
      const now = this.clock.now();
      const id = newId('rev');
      await caseRepo.insertReview(tx, {
        id,
        tenantId,
        conversationId,
        reasonCode: input.reasonCode ?? 'other',
        note: input.note ?? null,
        requestedById: actor.id ?? actor.type,
        requestedByName: actor.name,
        assignedOperatorId: input.assignedOperatorId ?? null,
        now,
      });
      await conversationRepo.setOpenCases(tx, tenantId, conversationId, { reviewId: id }, now);
      await recordActivity(tx, { tenantId, conversationId, kind: 'review.opened', actor, data: { reviewCaseId: id, reasonCode: input.reasonCode ?? 'other' }, now });
      return this.review(tx, tenantId, id);
    });
  }

  async assignReview(ctx: Ctx, { conversationId, operatorId }: ConversationRef & Static<typeof AssignReviewBody>) {
    const { tenantId, actor } = ctx;
    return this.db.transaction(async (tx) => {
      const reviewId = await this.openReviewId(tx, tenantId, conversationId);
      if (operatorId !== null) await requireActiveOperator(tx, tenantId, operatorId);
      await caseRepo.assignReview(tx, tenantId, reviewId, operatorId);
      await recordActivity(tx, { tenantId, conversationId, kind: 'review.assigned', actor, data: { reviewCaseId: reviewId, operatorId }, now: this.clock.now() });
      return this.review(tx, tenantId, reviewId);
    });
  }

  async resolveReview(ctx: Ctx, { conversationId, resolutionNote }: ConversationRef & Static<typeof ResolveReviewBody>) {
    const { tenantId, actor } = ctx;
    return this.db.transaction(async (tx) => {
      const reviewId = await this.openReviewId(tx, tenantId, conversationId);
      const now = this.clock.now();
      await caseRepo.resolveReview(tx, tenantId, reviewId, resolutionNote ?? null, now);
      await conversationRepo.setOpenCases(tx, tenantId, conversationId, { reviewId: null }, now);
      await recordActivity(tx, { tenantId, conversationId, kind: 'review.resolved', actor, data: { reviewCaseId: reviewId }, now });
      return this.review(tx, tenantId, reviewId);
    });
  }

  private async openReviewId(tx: Tx, tenantId: string, conversationId: string): Promise<string> {
    const conversation = await requireConversation(tx, tenantId, conversationId, true);
    if (!conversation.open_review_id) throw conflict('no review is open for this conversation');
    return conversation.open_review_id;
  }

  private async review(tx: Tx, tenantId: string, reviewId: string) {
    const row = await caseRepo.getReview(tx, tenantId, reviewId);
    if (!row) throw new DomainError('M2M_INTERNAL_ERROR', 'review vanished inside its transaction');
    return reviewView(row);
  }
}
