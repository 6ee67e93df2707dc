import type { Db, Tx } from '../db/driver.js';
import { conversationRepo } from '../conversations/repo.js';
import { enqueue } from '../jobs/queue.js';
import { cutText } from '../util/text.js';
import type { ClaimedJob, JobContext, JobRunner } from '../jobs/runner.js';
import type { JobWorker } from '../jobs/worker.js';
import type { MessengerSendApiProvider } from './providers/meta/messenger.js';
import { ChannelSendError, type ChannelConnection } from './providers/types.js';
import { channelRepo, type ChannelRow } from './repo.js';

export const PROFILE_TASK = 'channels.contact-profile';

export interface ContactProfileDeps {
  db: Db;
  messenger: MessengerSendApiProvider<'messenger'>;
  instagram: MessengerSendApiProvider<'instagram'>;
  openConnection: (row: ChannelRow) => ChannelConnection | undefined;
}

/**
 * Queues the profile lookup of a contact a Messenger/Instagram message just created, in the transaction that
 * stored the message. One pending lookup per contact.
 */
export async function queueContactProfile(tx: Tx, now: Date, tenantId: string, channelId: string, contactId: string): Promise<void> {
  await enqueue(tx, now, { task: PROFILE_TASK, tenantId, payload: { channelId, contactId }, dedupeKey: `${PROFILE_TASK}:${contactId}`, maxAttempts: 3 });
}

/**
 * The guest's profile name (decisions 7.1, "with the profile name when Meta gives it"): Messenger
 * `GET /{psid}?fields=name`, Instagram `?fields=name,username`. A job of its own, after the message is stored:
 * the callback is acknowledged and the message written whatever Meta answers here. The name is set only while the
 * contact has none (an operator's name is never replaced); a refusal or a profile Meta does not share leaves the
 * contact nameless, and is not retried.
 */
export function registerContactProfiles(runner: JobRunner, deps: ContactProfileDeps): JobWorker {
  const { db } = deps;
  runner.register(PROFILE_TASK, async (job: ClaimedJob<typeof PROFILE_TASK>, ctx: JobContext) => {
    const tenantId = job.tenantId ?? '';
    const { channelId, contactId } = job.payload;
    const [channel, contact] = await Promise.all([channelRepo.get(db, tenantId, channelId), conversationRepo.getContact(db, tenantId, contactId)]);
    if (!channel || !contact?.handle || contact.name) return;
    let connection: ChannelConnection | undefined;
    try {
      connection = deps.openConnection(channel);
    } catch {
      connection = undefined;
    }
    let name: string | undefined;
    try {
      if (connection?.provider === 'messenger') name = await deps.messenger.profileName(contact.handle, connection, ctx.signal);
      else if (connection?.provider === 'instagram') name = await deps.instagram.profileName(contact.handle, connection, ctx.signal);
    } catch (error) {
      if (error instanceof ChannelSendError && error.retryable && job.attempts < job.maxAttempts) throw error;
      ctx.log.info({ contactId, code: error instanceof ChannelSendError ? error.code : 'error' }, 'contact profile not available; the contact stays without a name');
      return;
    }
    const trimmed = cutText(name?.trim() ?? '', 200);
    if (!trimmed) return;
    await db.transaction(async (tx) => {
      const current = await conversationRepo.getContact(tx, tenantId, contactId);
      if (current && !current.name) await conversationRepo.updateContact(tx, tenantId, contactId, { name: trimmed }, ctx.clock.now());
      await ctx.completeIn(tx);
    });
  });
  return {};
}
