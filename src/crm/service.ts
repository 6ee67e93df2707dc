import type { Static } from 'typebox';
import { transactionOf, type Ctx } from '../context.js';
import type { CloseBody, CreateFollowUpBody, FollowUpParams, ListFollowUpsQuery, Opportunity, PatchFollowUpBody, PatchSettingsBody } from './schema.js';
import type { Clock } from '../clock.js';
import type { Db, Queryable, Tx } from '../db/driver.js';
import { conflict, invalid, notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { JsonText } from '../platform/json-text.js';
import { newId } from '../ids.js';
import { conversationRepo } from '../conversations/repo.js';
import { normalizePhone } from '../conversations/phone.js';
import { tenantRepo } from '../tenants/repo.js';
import { iso } from '../util/time.js';
import { emit } from '../webhooks/events.js';
import { HH_MM } from './quiet-hours.js';
import { crmRepo, type FollowUpFilter, type FollowUpRow, type OpportunityRow, type SettingsRow } from './repo.js';
import { followUpView, settingsView } from './views.js';

const EXPIRY_MS = 7 * 24 * 60 * 60 * 1000;
const OPEN: FollowUpRow['status'][] = ['pending', 'scheduled'];

/** An open follow-up past its expiry is expired even before the automation sweep writes it down. */
export function effectiveStatus(row: FollowUpRow, now: Date): FollowUpRow['status'] {
  return OPEN.includes(row.status) && !row.claim_state && row.expires_at.getTime() <= now.getTime() ? 'expired' : row.status;
}

export async function requireFollowUp(db: Queryable, tenantId: string, id: string, lock = false): Promise<FollowUpRow> {
  const row = await crmRepo.getFollowUp(db, tenantId, id, lock);
  if (!row) throw notFound('follow-up');
  return row;
}

/** Leads, opportunities, follow-ups and the automation settings. Sending lives in send.ts. */
type FollowUpRef = Static<typeof FollowUpParams>;

export class CrmService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly cursors: Cursors,
  ) {}

  async createLead(tenantId: string, input: { name: string; phone?: string; conversationId?: string }) {
    let phone: string | null = null;
    if (input.phone !== undefined) {
      phone = normalizePhone(input.phone) ?? null;
      if (!phone) throw invalid('body.phone', 'must be a valid international phone number');
    }
    return this.db.transaction(async (tx) => {
      if (input.conversationId && !(await conversationRepo.get(tx, tenantId, input.conversationId))) throw notFound('conversation');
      const row = await crmRepo.insertLead(tx, { id: newId('lead'), tenantId, name: input.name, phone, conversationId: input.conversationId ?? null, now: this.clock.now() });
      return { leadId: row.id, name: row.name, phone: row.phone_e164 ?? undefined, conversationId: row.conversation_id ?? undefined };
    });
  }

  async createOpportunity(tenantId: string, input: { leadId: string; stage: string; status: string; conversationId?: string }) {
    return this.db.transaction(async (tx) => {
      const lead = await crmRepo.getLead(tx, tenantId, input.leadId);
      if (!lead) throw notFound('lead');
      const conversationId = input.conversationId ?? lead.conversation_id;
      if (input.conversationId && !(await conversationRepo.get(tx, tenantId, input.conversationId))) throw notFound('conversation');
      const now = this.clock.now();
      const row = await crmRepo.insertOpportunity(tx, { id: newId('opp'), tenantId, leadId: lead.id, conversationId, stage: input.stage, status: input.status, now });
      await emit(tx, now, tenantId, 'crm.opportunity.created', { opportunityId: row.id, leadId: row.lead_id, ...conversationOf(row), revision: row.revision, stage: row.stage, status: row.status });
      return opportunityOf(row);
    });
  }

  /** Every change increases the revision and emits crm.opportunity.updated. */
  async updateOpportunity(tenantId: string, opportunityId: string, patch: { stage?: string; status?: string }) {
    return this.db.transaction(async (tx) => {
      const row = await crmRepo.updateOpportunity(tx, tenantId, opportunityId, patch, this.clock.now());
      if (!row) throw notFound('opportunity');
      await emitOpportunityUpdated(tx, this.clock.now(), row, Object.keys(patch));
      return opportunityOf(row);
    });
  }

  async createFollowUp(ctx: Ctx, input: Static<typeof CreateFollowUpBody>) {
    const { tenantId } = ctx;
    return transactionOf(this.db, ctx, async (tx) => {
      const lead = await crmRepo.getLead(tx, tenantId, input.leadId);
      if (!lead) throw notFound('lead');
      const conversation = await conversationRepo.get(tx, tenantId, input.conversationId);
      if (!conversation) throw notFound('conversation');
      if (lead.conversation_id && lead.conversation_id !== conversation.id) throw invalid('body.conversationId', "is not the lead's conversation");
      const settings = await crmRepo.settings(tx, tenantId);
      const opportunity = await crmRepo.latestOpportunity(tx, tenantId, lead.id);
      const now = this.clock.now();
      const dueAt = input.dueAt ? new Date(input.dueAt) : null;
      const row = await crmRepo.insertFollowUp(tx, {
        id: newId('fu'),
        tenant_id: tenantId,
        lead_id: lead.id,
        opportunity_id: opportunity?.id ?? null,
        conversation_id: conversation.id,
        channel_kind: conversation.channel_kind,
        status: dueAt ? 'scheduled' : 'pending',
        mode: settings.follow_up_mode === 'auto' ? 'auto' : 'draft',
        reason_code: input.reasonCode ?? 'other',
        reason_text: input.reasonText ?? null,
        message_draft: input.messageDraft ?? null,
        draft_status: input.messageDraft ? 'edited' : 'empty',
        due_at: dueAt,
        expires_at: new Date(Math.max(dueAt?.getTime() ?? 0, now.getTime()) + EXPIRY_MS),
        created_at: now,
      });
      return { followUp: followUpView(row) };
    });
  }

  async getFollowUp({ tenantId }: Ctx, { followUpId }: FollowUpRef) {
    return { followUp: followUpView(await requireFollowUp(this.db, tenantId, followUpId)) };
  }

  async listFollowUps({ tenantId }: Ctx, query: Static<typeof ListFollowUpsQuery>) {
    const filter: FollowUpFilter = { status: query.status, mode: query.mode, leadId: query.leadId, conversationId: query.conversationId, dueAfter: query.dueAfter };
    const binding = { tenantId, ...filter };
    const after = query.cursor ? this.cursors.decode<{ at: string; id: string }>('follow-ups', binding, query.cursor) : undefined;
    const limit = query.limit ?? 50;
    const rows = await crmRepo.listFollowUps(this.db, tenantId, filter, { limit: limit + 1, after });
    const { page, hasMore, next } = this.cursors.page('follow-ups', binding, rows, limit, (last) => ({ at: iso(last.created_at), id: last.id }));
    return { followUps: page.map(followUpView), ...next, hasMore };
  }

  /** Only supplied fields change; an open follow-up only. Never touches the automation settings. */
  async updateFollowUp({ tenantId }: Ctx, { followUpId: id, ...patch }: FollowUpRef & Static<typeof PatchFollowUpBody>) {
    return this.db.transaction(async (tx) => {
      const row = await requireFollowUp(tx, tenantId, id, true);
      const status = effectiveStatus(row, this.clock.now());
      if (!OPEN.includes(status) || row.claim_state) throw conflict(`a ${status} follow-up cannot be edited`, { status });
      const changes: Parameters<typeof crmRepo.updateFollowUp>[3] = {};
      if (patch.messageDraft !== undefined) {
        changes.message_draft = patch.messageDraft;
        changes.draft_status = 'edited';
      }
      if (patch.dueAt !== undefined) {
        if (patch.dueAt !== null && new Date(patch.dueAt).getTime() > row.expires_at.getTime()) {
          throw invalid('body.dueAt', `must not be after the follow-up expires (expiresAt ${iso(row.expires_at)})`);
        }
        changes.due_at = patch.dueAt === null ? null : new Date(patch.dueAt);
        changes.status = patch.dueAt === null ? 'pending' : 'scheduled';
      }
      return { followUp: followUpView(await crmRepo.updateFollowUp(tx, tenantId, id, changes, this.clock.now())) };
    });
  }

  /** Dismiss (the suggestion was not wanted) or cancel (stop it): both final, open follow-ups only. */
  async dismiss(ctx: Ctx, input: FollowUpRef & Static<typeof CloseBody>) {
    return this.close(ctx.tenantId, input.followUpId, 'dismissed', input.feedbackReason);
  }

  async cancel(ctx: Ctx, input: FollowUpRef & Static<typeof CloseBody>) {
    return this.close(ctx.tenantId, input.followUpId, 'canceled', input.feedbackReason);
  }

  private async close(tenantId: string, id: string, outcome: 'dismissed' | 'canceled', feedbackReason?: string) {
    return this.db.transaction(async (tx) => {
      const row = await requireFollowUp(tx, tenantId, id, true);
      const status = effectiveStatus(row, this.clock.now());
      if (!OPEN.includes(status) || row.claim_state) throw conflict(`a ${status} follow-up cannot be ${outcome}`, { status });
      const updated = await crmRepo.updateFollowUp(tx, tenantId, id, { status: outcome, feedback_reason: feedbackReason ?? null }, this.clock.now());
      return { followUp: followUpView(updated) };
    });
  }

  async settings({ tenantId }: Ctx) {
    const tenant = await tenantRepo.get(this.db, tenantId);
    if (!tenant) throw notFound('tenant');
    return settingsView(await crmRepo.settings(this.db, tenantId), tenant);
  }

  /** Only supplied fields change. Changing automation is an explicit act; nothing else calls this. */
  async updateSettings({ tenantId }: Ctx, patch: Static<typeof PatchSettingsBody>) {
    if (patch.quietHours) {
      const { start, end } = patch.quietHours;
      if (!HH_MM.test(start)) throw invalid('body.quietHours.start', 'must be HH:mm (00:00–23:59)');
      if (!HH_MM.test(end)) throw invalid('body.quietHours.end', 'must be HH:mm (00:00–23:59)');
      if (start === end) throw invalid('body.quietHours', 'start and end must differ');
    }
    return this.db.transaction(async (tx) => {
      const current = await crmRepo.settings(tx, tenantId);
      const next: SettingsRow = {
        follow_up_mode: patch.followUpMode ?? current.follow_up_mode,
        follow_up_level: patch.followUpLevel ?? current.follow_up_level,
        follow_up_instructions: patch.followUpInstructions !== undefined ? patch.followUpInstructions : current.follow_up_instructions,
        quiet_start: patch.quietHours === undefined ? current.quiet_start : (patch.quietHours?.start ?? null),
        quiet_end: patch.quietHours === undefined ? current.quiet_end : (patch.quietHours?.end ?? null),
      };
      await crmRepo.saveSettings(tx, tenantId, next, this.clock.now());
      const tenant = await tenantRepo.get(tx, tenantId);
      return settingsView(next, tenant!);
    });
  }
}

export async function emitOpportunityUpdated(tx: Tx, now: Date, row: OpportunityRow, changed: string[]) {
  await emit(tx, now, row.tenant_id, 'crm.opportunity.updated', { opportunityId: row.id, leadId: row.lead_id, ...conversationOf(row), revision: row.revision, stage: row.stage, status: row.status, changed });
}

/** An opportunity as the API writes it: its stored document, the one home of that form (src/crm/sql/opportunity_document.sql). */
function opportunityOf(row: OpportunityRow): Static<typeof Opportunity> {
  return new JsonText<Static<typeof Opportunity>>(row.document).value();
}

/** An opportunity event's conversationId, when the opportunity has one. */
function conversationOf(row: OpportunityRow): { conversationId?: string } {
  return row.conversation_id ? { conversationId: row.conversation_id } : {};
}
