import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { enqueue } from '../jobs/queue.js';
import type { ClaimedJob, JobContext, JobRunner } from '../jobs/runner.js';
import type { JobWorker } from '../jobs/worker.js';
import { ChannelSendError, type ChannelConnection } from './providers/types.js';
import type { WhatsAppCloudProvider, WhatsAppTemplate } from './providers/meta/whatsapp.js';
import { channelRepo, type ChannelRow, type TemplateLocale } from './repo.js';

export const TEMPLATE_SYNC_TASK = 'channels.template-sync';

export interface TemplateSyncDeps {
  db: Db;
  whatsapp: WhatsAppCloudProvider;
  /** The channel's connection with its token opened (only in this job). */
  openConnection: (row: ChannelRow) => ChannelConnection | undefined;
  intervalMs: number;
}

/** Queues the sync of one channel's templates (on creation), in the caller's transaction. */
export async function queueTemplateSync(tx: Tx, now: Date, tenantId: string, channelId: string): Promise<void> {
  await enqueue(tx, now, { task: TEMPLATE_SYNC_TASK, tenantId, payload: { channelId }, dedupeKey: `${TEMPLATE_SYNC_TASK}:${channelId}`, maxAttempts: 5 });
}

async function scheduleAll(db: Db, clock: Clock, runAt?: Date): Promise<void> {
  await db.transaction((tx) => enqueue(tx, clock.now(), { task: TEMPLATE_SYNC_TASK, payload: {}, dedupeKey: TEMPLATE_SYNC_TASK, runAt: runAt ?? clock.now(), maxAttempts: 5 }));
}

/**
 * Template sync (decisions 7.1): every TEMPLATE_SYNC_INTERVAL_MS, and for one channel when it is created, the
 * workers read each whatsapp_cloud channel's templates from `GET /{wabaId}/message_templates`; `APPROVED` is
 * ready, `lastFetchedAt` is the sync's time. One channel's failure (recorded as its last error; a refused token
 * marks it failing) never stops the others.
 */
export function registerTemplateSync(runner: JobRunner, deps: TemplateSyncDeps): JobWorker {
  const { db } = deps;
  runner.register(TEMPLATE_SYNC_TASK, async (job: ClaimedJob<typeof TEMPLATE_SYNC_TASK>, ctx: JobContext) => {
    const one = job.payload.channelId;
    const channels = one
      ? [await channelRepo.get(db, job.tenantId ?? '', one)].filter((row): row is ChannelRow => row?.provider === 'whatsapp_cloud')
      : await channelRepo.allOfProvider(db, 'whatsapp_cloud');
    let synced = 0;
    for (const channel of channels) {
      if (ctx.signal.aborted) break;
      try {
        if (await syncChannel(deps, channel, ctx)) synced++;
      } catch (error) {
        if (!(error instanceof ChannelSendError)) throw error;
        const failing = 'authFailed' in error && error.authFailed === true;
        await channelRepo.noteError(db, channel.tenant_id, channel.id, { code: error.code, message: error.message }, failing, ctx.clock.now());
        ctx.log.warn({ channelId: channel.id, code: error.code }, 'template sync failed for a channel');
      }
    }
    const now = ctx.clock.now();
    await db.transaction(async (tx) => {
      await ctx.completeIn(tx);
      if (!one) await enqueue(tx, now, { task: TEMPLATE_SYNC_TASK, payload: {}, dedupeKey: TEMPLATE_SYNC_TASK, runAt: new Date(now.getTime() + deps.intervalMs), maxAttempts: 5 });
    });
    if (synced > 0) ctx.log.info({ channels: synced }, 'templates synced');
  });
  return { schedule: (db, clock) => scheduleAll(db, clock) };
}

async function syncChannel(deps: TemplateSyncDeps, channel: ChannelRow, ctx: JobContext): Promise<boolean> {
  const connection = deps.openConnection(channel);
  if (connection?.provider !== 'whatsapp_cloud' || !connection.wabaId) return false;
  const templates = await deps.whatsapp.listTemplates(connection, ctx.signal);
  const now = ctx.clock.now();
  const byName = new Map<string, { category: string; locales: TemplateLocale[] }>();
  for (const t of templates) {
    const entry = byName.get(t.templateName) ?? { category: t.category, locales: [] };
    entry.locales.push(localeOf(t, now));
    byName.set(t.templateName, entry);
  }
  await deps.db.transaction(async (tx) => {
    for (const [templateName, { category, locales }] of byName) {
      await channelRepo.syncTemplate(tx, { tenantId: channel.tenant_id, channelId: channel.id, templateName, category, locales, now });
    }
  });
  return true;
}

function localeOf(t: WhatsAppTemplate, now: Date): TemplateLocale {
  return { locale: t.locale, status: t.status, ready: t.ready, lastFetchedAt: now.toISOString() };
}
