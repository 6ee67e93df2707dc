import type { Db } from '../db/driver.js';
import type { ClaimedJob, JobContext, JobRunner } from '../jobs/runner.js';
import { assessAsset, type Assessment } from './assess.js';
import type { BlobStore } from './blob-store.js';
import { chunkText, previewOf } from './chunker.js';
import { TASK_INGEST, TASK_VALIDATE_ASSET } from './common.js';
import { ExtractionError, baseType, detectFormat, extractText } from './extract.js';
import { FetchFailure, type GuardedFetcher } from './fetch.js';
import { sourceRepo, type SourceRow } from './repo.js';
import type { JobWorker } from '../jobs/worker.js';
import type { Embedder } from './crawler/embedder.js';

export interface KnowledgeJobDeps {
  db: Db;
  blobs: BlobStore;
  fetcher: GuardedFetcher;
  /** Embeds the chunks, as the crawler does, so that the search's vector side finds every kind of source. */
  embedder: Embedder;
}

/** A fetched page's text as UTF-8: pages that declare another charset are transcoded first. */
function asUtf8(body: Buffer, contentType: string | undefined): Buffer {
  const charset = /charset=["']?([\w-]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase();
  if (!charset || charset === 'utf-8' || charset === 'utf8' || !baseType(contentType).startsWith('text/')) return body;
  try {
    return Buffer.from(new TextDecoder(charset).decode(body), 'utf8');
  } catch {
    return body;
  }
}

/** The source's text: stored (text), extracted from its uploaded bytes (file), or fetched through the SSRF guard (url). */
async function loadText(source: SourceRow, deps: KnowledgeJobDeps, signal: AbortSignal): Promise<string> {
  if (source.kind === 'text') return source.text ?? '';
  if (source.kind === 'file') {
    const bytes = source.blob_key ? await deps.blobs.get(source.blob_key) : undefined;
    if (!bytes) throw new ExtractionError('the uploaded file is missing from the blob store');
    return (await extractText(bytes, await detectFormat(bytes, source.file_content_type ?? undefined, source.file_name ?? undefined))).text;
  }
  const page = await deps.fetcher.get(source.url ?? '', signal);
  const body = asUtf8(page.body, page.contentType);
  return (await extractText(body, await detectFormat(body, page.contentType ?? 'application/octet-stream', new URL(page.url).pathname))).text;
}

function describe(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ').slice(0, 500);
}

/**
 * knowledge.ingest: text → chunks of about 500 tokens → stored with the source's chunkCount and tokens, all
 * in one transaction that also completes the job. Permanent failures (unsupported or mismatched bytes,
 * blocked destinations, 4xx, pages over the size cap) are recorded on the source at once; transient ones
 * (timeouts, 5xx, connection errors) are retried by the runner and recorded after the last attempt.
 */
async function ingest(deps: KnowledgeJobDeps, job: ClaimedJob<typeof TASK_INGEST>, ctx: JobContext): Promise<void> {
  const { db } = deps;
  const tenantId = job.tenantId ?? '';
  const source = await sourceRepo.get(db, tenantId, job.payload.sourceId);
  if (!source || !['text', 'file', 'url', 'website_page'].includes(source.kind)) {
    ctx.log.warn({ sourceId: job.payload.sourceId }, 'ingest job for an unknown source; dropping');
    return;
  }
  let text: string;
  try {
    text = await loadText(source, deps, ctx.signal);
    if (!text.trim()) throw new ExtractionError('no text could be extracted');
  } catch (error) {
    const permanent = (error instanceof ExtractionError || error instanceof FetchFailure) && error.permanent;
    if (!permanent && job.attempts < job.maxAttempts) throw error;
    await db.transaction(async (tx) => {
      await sourceRepo.failIngest(tx, source.tenant_id, source.id, describe(error), ctx.clock.now());
      await ctx.completeIn(tx);
    });
    ctx.log.info({ sourceId: source.id, reason: describe(error) }, 'ingestion failed');
    return;
  }
  const chunks = await chunkText(text);
  const vectors = await embedChunks(deps.embedder, chunks.map((c) => c.text), job, ctx);
  await db.transaction(async (tx) => {
    if (await sourceRepo.get(tx, tenantId, source.id, true)) {
      await sourceRepo.storeChunks(tx, { id: source.id, tenantId }, chunks, { preview: previewOf(text), now: ctx.clock.now(), vectors });
    }
    await ctx.completeIn(tx);
  });
  ctx.log.debug({ sourceId: source.id, chunks: chunks.length }, 'source ingested');
}

/**
 * The chunks' vectors, a batch at a time. An embeddings endpoint still failing at the job's last attempt leaves
 * the chunks without vectors (keyword search still finds them) rather than the source without its text.
 */
async function embedChunks(embedder: Embedder, texts: string[], job: ClaimedJob<typeof TASK_INGEST>, ctx: JobContext): Promise<{ model: string; vectors: number[][] } | undefined> {
  try {
    const vectors: number[][] = [];
    for (let start = 0; start < texts.length; start += embedder.batchSize) {
      vectors.push(...(await embedder.embed(texts.slice(start, start + embedder.batchSize), ctx.signal)));
    }
    return { model: embedder.model, vectors };
  } catch (error) {
    if (job.attempts < job.maxAttempts) throw error;
    ctx.log.warn({ sourceId: job.payload.sourceId, reason: describe(error) }, 'chunks stored without vectors: embedding failed');
    return undefined;
  }
}

/** knowledge.validate-asset: sniffs the stored bytes and records ready / unsupported / blocked / failed with findings. */
async function validate(deps: KnowledgeJobDeps, job: ClaimedJob<typeof TASK_VALIDATE_ASSET>, ctx: JobContext): Promise<void> {
  const { db } = deps;
  const source = await sourceRepo.get(db, job.tenantId ?? '', job.payload.sourceId);
  if (!source || source.kind !== 'asset' || source.validation_status !== 'pending') return;
  let result: Omit<Assessment, 'status'> & { status: Assessment['status'] | 'failed' };
  try {
    const bytes = source.blob_key ? await deps.blobs.get(source.blob_key) : undefined;
    result = bytes
      ? await assessAsset(bytes, source.file_content_type ?? '')
      : { status: 'failed', findings: ['the stored bytes could not be found; upload the asset again'], detectedContentType: null, mediaType: null };
  } catch (error) {
    if (job.attempts < job.maxAttempts) throw error;
    result = { status: 'failed', findings: [`validation could not complete: ${describe(error)}`], detectedContentType: null, mediaType: null };
  }
  await db.transaction(async (tx) => {
    await sourceRepo.setValidation(tx, source.tenant_id, source.id, { ...result, now: ctx.clock.now() });
    await ctx.completeIn(tx);
  });
}

export function registerKnowledgeJobs(runner: JobRunner, deps: KnowledgeJobDeps): JobWorker {
  runner.register(TASK_INGEST, (job, ctx) => ingest(deps, job, ctx));
  runner.register(TASK_VALIDATE_ASSET, (job, ctx) => validate(deps, job, ctx));
  return { close: () => deps.fetcher.close() };
}
