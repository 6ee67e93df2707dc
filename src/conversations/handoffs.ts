import type { Clock } from '../clock.js';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { conflict, notFound } from '../errors.js';
import { iso } from '../util/time.js';
import { emit } from '../webhooks/events.js';
import { caseRepo, type HandoffWithOperator } from './case-repo.js';
import { conversationRepo } from './repo.js';
import { recordActivity, requireConversation } from './service.js';

export function publicHandoffView(row: HandoffWithOperator) {
  return {
    caseId: row.id,
    status: row.status,
    assignedOperatorId: row.assigned_operator_id ?? undefined,
    assignedOperatorName: row.assigned_operator_name ?? undefined,
    openedAt: iso(row.opened_at)!,
    resolvedAt: iso(row.resolved_at),
  };
}

/**
 * The human handoff as an integrator sees it: read the latest one, resolve the open one. Resolving touches
 * only the handoff: reviews, unread and needs-reply stay as they are.
 */
export class HandoffService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async get({ tenantId }: Ctx, { conversationId }: { conversationId: string }) {
    await requireConversation(this.db, tenantId, conversationId);
    const row = await caseRepo.latestHandoff(this.db, tenantId, conversationId);
    if (!row) throw notFound('handoff');
    return { handoff: publicHandoffView(row) };
  }

  async resolve(ctx: Ctx, { conversationId, resolutionNote }: { conversationId: string; resolutionNote?: string }) {
    const { tenantId } = ctx;
    return this.db.transaction(async (tx) => {
      const conversation = await requireConversation(tx, tenantId, conversationId, true);
      const handoffId = conversation.open_handoff_id;
      if (!handoffId) throw conflict('no handoff is open for this conversation', { reason: 'handoff_not_open' });
      const now = this.clock.now();
      await caseRepo.updateHandoff(tx, tenantId, handoffId, { resolve: true, resolutionNote }, now);
      await conversationRepo.setOpenCases(tx, tenantId, conversationId, { handoffId: null }, now);
      await recordActivity(tx, { tenantId, conversationId, kind: 'handoff.resolved', actor: ctx.actor, data: { caseId: handoffId }, now });
      await emit(tx, now, tenantId, 'conversation.handoff.updated', { conversationId, caseId: handoffId, action: 'resolved' });
      return { handoff: publicHandoffView((await caseRepo.latestHandoff(tx, tenantId, conversationId))!) };
    });
  }
}
