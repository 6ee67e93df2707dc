import type { Db } from '../db/driver.js';
import type { Clock } from '../clock.js';
import { conversationRepo } from '../conversations/repo.js';
import { DomainError } from '../errors.js';
import { enqueue } from '../jobs/queue.js';
import type { JobContext, JobRunner } from '../jobs/runner.js';
import { tenantRepo } from '../tenants/repo.js';
import { inQuietHours } from './quiet-hours.js';
import { crmRepo, type FollowUpRow } from './repo.js';
import type { FollowUpSender } from '../messaging/follow-up-send.js';
import { generatedDraft } from './views.js';
import type { TaskName } from '../jobs/tasks.js';
import type { JobWorker } from '../jobs/worker.js';

export const AUTOMATION_TASK = 'crm.automation' satisfies TaskName;
const BATCH = 100;

export async function scheduleAutomation(db: Db, clock: Clock, runAt?: Date): Promise<void> {
  await db.transaction((tx) => enqueue(tx, clock.now(), { task: AUTOMATION_TASK, dedupeKey: AUTOMATION_TASK, runAt: runAt ?? clock.now(), maxAttempts: 5 }));
}

/**
 * Follow-up automation, run every `intervalMs` by one worker at a time (dedupe key):
 * expiry for everyone; for tenants in `draft` mode, drafts for due follow-ups; in `auto` mode, sends of
 * due follow-ups outside quiet hours to contacts with consent, through the same claim as a manual send.
 */
export function registerAutomation(runner: JobRunner, deps: { db: Db; sender: FollowUpSender; intervalMs: number }): JobWorker {
  const { db, sender, intervalMs } = deps;
  runner.register(AUTOMATION_TASK, async (job, ctx) => {
    const now = ctx.clock.now();
    const expired = await crmRepo.expireAll(db, now);
    // Accepted sends whose CRM completion failed are finished for every tenant, whatever its mode.
    for (const unfinished of await crmRepo.unfinishedSendsAll(db)) {
      await db
        .transaction((tx) => sender.completeIn(tx, unfinished.tenant_id, unfinished.id))
        .catch((error: unknown) => ctx.log.warn({ err: error, followUpId: unfinished.id }, 'follow-up completion still failing'));
    }
    let drafted = 0;
    let sent = 0;
    for (const { tenant_id: tenantId } of await crmRepo.automatedTenants(db)) {
      // One tenant's trouble must not stop automation for the others.
      try {
        const counts = await runTenant(db, sender, tenantId, now, ctx.log);
        drafted += counts.drafted;
        sent += counts.sent;
      } catch (error) {
        ctx.log.error({ err: error, tenantId }, 'follow-up automation failed for a tenant');
      }
    }
    await db.transaction(async (tx) => {
      await ctx.completeIn(tx);
      await enqueue(tx, now, { task: AUTOMATION_TASK, dedupeKey: AUTOMATION_TASK, runAt: new Date(now.getTime() + intervalMs), maxAttempts: 5 });
    });
    if (expired + drafted + sent > 0) ctx.log.info({ expired, drafted, sent, jobId: job.id }, 'follow-up automation');
  });
  return { schedule: (db, clock) => scheduleAutomation(db, clock) };
}

async function runTenant(db: Db, sender: FollowUpSender, tenantId: string, now: Date, log: JobContext['log']): Promise<{ drafted: number; sent: number }> {
  let drafted = 0;
  let sent = 0;
  const settings = await crmRepo.settings(db, tenantId);
  const due = await crmRepo.dueFollowUps(db, tenantId, now, BATCH);
  if (settings.follow_up_mode === 'draft') {
    for (const row of due.filter((r) => r.draft_status === 'empty')) {
      const contactName = await contactNameOf(db, row);
      // Re-read under the row lock: the user may have written, sent or closed it since the batch was read.
      const written = await db.transaction(async (tx) => {
        const current = await crmRepo.getFollowUp(tx, tenantId, row.id, true);
        if (!current || current.draft_status !== 'empty' || current.claim_state || (current.status !== 'pending' && current.status !== 'scheduled')) return false;
        await crmRepo.updateFollowUp(tx, tenantId, row.id, { message_draft: generatedDraft(current, contactName), draft_status: 'generated' }, now);
        return true;
      });
      if (written) drafted++;
    }
    return { drafted, sent };
  }
  const tenant = await tenantRepo.get(db, tenantId);
  const quiet = settings.quiet_start && settings.quiet_end ? { start: settings.quiet_start, end: settings.quiet_end } : null;
  if (!tenant || inQuietHours(now, tenant.timezone, quiet)) return { drafted, sent };
  for (const row of due) {
    try {
      await sender.sendAs(tenantId, row.id, { requireConsent: true });
      sent++;
    } catch (error) {
      // Refused by the claim (a manual send won) or by the contact's consent: that is the rule working.
      if (!(error instanceof DomainError)) throw error;
      log.info({ followUpId: row.id, code: error.code, reason: error.details.reason }, 'automation skipped a follow-up');
    }
  }
  return { drafted, sent };
}

async function contactOf(db: Db, row: FollowUpRow) {
  const conversation = await conversationRepo.get(db, row.tenant_id, row.conversation_id);
  return conversation ? conversationRepo.getContact(db, row.tenant_id, conversation.contact_id) : undefined;
}

async function contactNameOf(db: Db, row: FollowUpRow): Promise<string | null> {
  return (await contactOf(db, row))?.name ?? null;
}
