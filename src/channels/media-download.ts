import type { Db, Tx } from '../db/driver.js';
import { enqueue } from '../jobs/queue.js';
import type { ClaimedJob, JobContext, JobRunner } from '../jobs/runner.js';
import type { JobWorker } from '../jobs/worker.js';
import type { BlobStore } from '../knowledge/blob-key.js';
import type { MessageContent } from '../conversations/repo.js';
import { ChannelSendError, type ChannelConnection } from './providers/types.js';
import { MediaDownloadError } from './providers/meta/graph-client.js';
import type { WhatsAppCloudProvider } from './providers/meta/whatsapp.js';
import type { ChannelRow } from './repo.js';

export const MEDIA_TASK = 'channels.media-download';

type Media = Required<MessageContent>['media'];
type ChannelAccess = Pick<ChannelRow, 'provider' | 'connection' | 'connection_secret'>;

export interface MediaDownloadDeps {
  db: Db;
  blobs: BlobStore;
  whatsapp: WhatsAppCloudProvider;
  openConnection: (row: ChannelAccess) => ChannelConnection | undefined;
  /** MEDIA_MAX_BYTES: larger media end `failed` with reason `too_large`. */
  maxBytes: number;
}

/** Queues the download of an inbound message's media, in the transaction that stored the message. */
export async function queueMediaDownload(tx: Tx, now: Date, tenantId: string, messageId: string): Promise<void> {
  await enqueue(tx, now, { task: MEDIA_TASK, tenantId, payload: { messageId }, maxAttempts: 5 });
}

/** Where a message's media bytes live in the blob store. */
export function mediaBlobKey(tenantId: string, messageId: string): string {
  return `media/${tenantId}/${messageId}`;
}

/**
 * Inbound media into the blob store (decisions 7.2): WhatsApp `GET /{media-id}`, then its URL with the bearer
 * token, at most MEDIA_MAX_BYTES. Success: `media.status: ready` with the size and the type the answer carried.
 * A refusal that a retry would repeat (too large, wrong type, gone) or the last attempt: `failed` with `reason`;
 * the message is kept either way.
 */
export function registerMediaDownload(runner: JobRunner, deps: MediaDownloadDeps): JobWorker {
  const { db } = deps;
  runner.register(MEDIA_TASK, async (job: ClaimedJob<typeof MEDIA_TASK>, ctx: JobContext) => {
    const tenantId = job.tenantId ?? '';
    const { messageId } = job.payload;
    const [found] = await db.query<{ media: Media | null } & { [K in keyof ChannelAccess]: ChannelAccess[K] | null }>(
      `SELECT m.media, c.provider, c.connection, c.connection_secret
       FROM messages m LEFT JOIN channels c ON c.id = m.channel_id AND c.tenant_id = m.tenant_id
       WHERE m.tenant_id = $1 AND m.id = $2`,
      [tenantId, messageId],
    );
    const media = found?.media;
    if (!found || !media || media.status !== 'pending') return;
    let outcome: Media;
    try {
      const { provider, connection: stored, connection_secret } = found;
      const connection = provider && stored ? deps.openConnection({ provider, connection: stored, connection_secret }) : undefined;
      if (connection?.provider !== 'whatsapp_cloud' || !media.providerMediaId) {
        throw new MediaDownloadError('not_found', 'no way to fetch this media from its channel', false);
      }
      const download = await deps.whatsapp.downloadMedia(media.providerMediaId, connection, { maxBytes: deps.maxBytes, expectedContentType: media.contentType, signal: ctx.signal });
      const chunks: Buffer[] = [];
      for await (const chunk of download.body) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array));
      const bytes = Buffer.concat(chunks);
      await deps.blobs.put(mediaBlobKey(tenantId, messageId), bytes);
      outcome = { ...media, contentType: download.contentType, sizeBytes: bytes.length, status: 'ready' };
    } catch (error) {
      const reason = error instanceof MediaDownloadError ? error.reason : error instanceof ChannelSendError ? error.code : 'internal_error';
      const retryable = error instanceof MediaDownloadError || error instanceof ChannelSendError ? error.retryable : true;
      if (retryable && job.attempts < job.maxAttempts) throw error;
      outcome = { ...media, status: 'failed', reason };
      ctx.log.warn({ messageId, reason }, 'media download failed');
    }
    await db.transaction(async (tx) => {
      await tx.query(`UPDATE messages SET media = $3::jsonb WHERE tenant_id = $1 AND id = $2`, [tenantId, messageId, JSON.stringify(outcome)]);
      await ctx.completeIn(tx);
    });
  });
  return {};
}
