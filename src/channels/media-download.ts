import type { Db, Tx } from '../db/driver.js';
import { enqueue } from '../jobs/queue.js';
import type { ClaimedJob, JobContext, JobRunner } from '../jobs/runner.js';
import type { JobWorker } from '../jobs/worker.js';
import type { BlobStore } from '../knowledge/blob-key.js';
import type { MessageContent } from '../conversations/repo.js';
import { ChannelSendError, type ChannelConnection } from './providers/types.js';
import { MediaDownloadError, type DownloadOptions, type MediaDownload } from './providers/meta/graph-client.js';
import type { WhatsAppCloudProvider } from './providers/meta/whatsapp.js';
import type { ChannelRow } from './repo.js';

export const MEDIA_TASK = 'channels.media-download';

type Media = Required<MessageContent>['media'];
type ChannelAccess = Pick<ChannelRow, 'provider' | 'connection' | 'connection_secret'>;

export interface MediaDownloadDeps {
  db: Db;
  blobs: BlobStore;
  whatsapp: WhatsAppCloudProvider;
  /** Fetches a Messenger/Instagram attachment URL (signed by Meta's CDN, no token) through the SSRF guard. */
  downloadUrl: (url: string, options: Omit<DownloadOptions, 'dispatcher'>) => Promise<MediaDownload>;
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
 * token; Messenger/Instagram the attachment URL of the callback (no token, through the SSRF guard, up to 3
 * redirects); at most MEDIA_MAX_BYTES. Success: `media.status: ready` with the size and the type the answer carried.
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
      let download: MediaDownload;
      if (connection?.provider === 'whatsapp_cloud' && media.providerMediaId) {
        download = await deps.whatsapp.downloadMedia(media.providerMediaId, connection, { maxBytes: deps.maxBytes, expectedContentType: media.contentType, signal: ctx.signal });
      } else if ((connection?.provider === 'messenger' || connection?.provider === 'instagram') && media.url) {
        // Meta names no type for these: the answer's Content-Type is the media's.
        download = await deps.downloadUrl(media.url, { maxBytes: deps.maxBytes, maxRedirects: 3, signal: ctx.signal });
      } else {
        throw new MediaDownloadError('not_found', 'no way to fetch this media from its channel', false);
      }
      const chunks: Buffer[] = [];
      for await (const chunk of download.body) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array));
      const bytes = Buffer.concat(chunks);
      await deps.blobs.put(mediaBlobKey(tenantId, messageId), bytes);
      // The attachment URL is signed and short-lived: it is not kept once the bytes are ours.
      const { url: _url, ...kept } = media;
      outcome = { ...kept, contentType: download.contentType, sizeBytes: bytes.length, status: 'ready' };
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
