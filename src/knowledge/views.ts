import { iso } from '../util/time.js';
import type { FolderRow } from './folder-repo.js';
import type { AnySourceRow, SourceRow } from './repo.js';
import type { PageRow, WebsiteRow } from './website-repo.js';

/** ISO text as the API prints it; rows from the inventory already carry it as text. */
function stamp(value: Date | string | null | undefined): string | undefined {
  return typeof value === 'string' ? value : iso(value);
}

function scopeOf(propertyId: string | null): 'global' | 'property' {
  return propertyId ? 'property' : 'global';
}

function createdByView(row: { created_by: SourceRow['created_by'] }) {
  if (!row.created_by) return undefined;
  const { id, displayName, email } = row.created_by;
  return { id, displayName, ...(email ? { email } : {}) };
}

/** An asset as the spec's Knowledge asset (no extra properties). */
export function assetView(row: AnySourceRow) {
  return {
    sourceId: row.id,
    title: row.title ?? '',
    description: row.description ?? undefined,
    mediaType: row.media_type ?? undefined,
    contentType: row.file_content_type ?? '',
    filename: row.file_name ?? '',
    sizeBytes: row.file_size ?? 0,
    active: row.active,
    validationStatus: row.validation_status ?? 'pending',
    validationFindings: row.validation_findings ?? [],
    propertyId: row.property_id ?? undefined,
    propertyName: row.property_name ?? undefined,
    folderId: row.folder_id ?? undefined,
  };
}

/**
 * A text, file, url or asset source (assets are listed as sourceType file with their `asset` block).
 * `text` is present only when the row carries it (creation responses, not the inventory).
 */
export function sourceView(row: AnySourceRow, generationState?: 'staging' | 'current' | 'superseded') {
  const sourceType = row.kind === 'asset' || row.kind === 'file' ? 'file' : row.kind === 'text' ? 'text' : 'url';
  return {
    sourceId: row.id,
    sourceType: sourceType as 'text' | 'file' | 'url',
    title: row.title ?? undefined,
    active: row.active,
    updatedAt: stamp(row.updated_at),
    text: row.text ?? undefined,
    url: row.url ?? undefined,
    chunkCount: row.chunk_count,
    activeTokens: row.active ? row.tokens : 0,
    scope: scopeOf(row.property_id),
    propertyId: row.property_id ?? undefined,
    propertyName: row.property_name ?? undefined,
    preview: row.preview ?? undefined,
    originalFile: row.file_name
      ? { filename: row.file_name, contentType: row.file_content_type ?? '', size: row.file_size ?? 0, uploadedAt: stamp(row.uploaded_at) ?? stamp(row.created_at)! }
      : undefined,
    asset: row.kind === 'asset' ? assetView(row) : undefined,
    createdAt: stamp(row.created_at),
    createdBy: createdByView(row),
    websiteId: row.website_id ?? undefined,
    websiteGenerationId: row.website_generation_id ?? undefined,
    canonicalUrl: row.canonical_url ?? undefined,
    websiteGenerationState: generationState,
  };
}

/**
 * A managed website as one inventory item with its current generation's pages. Counts are computed from
 * those pages, so they are always true: chunkCount and selectedTokens over enabled pages, activeTokens
 * the same when the website is active.
 */
export function websiteView(row: AnySourceRow, website: WebsiteRow, pages: PageRow[]) {
  const enabled = pages.filter((p) => p.enabled);
  const selectedTokens = enabled.reduce((sum, p) => sum + p.tokens, 0);
  return {
    websiteId: website.id,
    sourceId: row.id,
    sourceType: 'website' as const,
    active: row.active,
    scope: scopeOf(row.property_id),
    title: row.title ?? website.root_url.slice(0, 160),
    url: row.url ?? website.root_url,
    rootUrl: website.root_url,
    normalizedRootUrl: website.normalized_root_url,
    chunkCount: enabled.reduce((sum, p) => sum + p.chunk_count, 0),
    activeTokens: row.active ? selectedTokens : 0,
    selectedTokens,
    createdBy: createdByView(row),
    crawlDepth: website.crawl_depth,
    maxPages: website.max_pages,
    propertyId: row.property_id ?? undefined,
    propertyName: row.property_name ?? undefined,
    status: website.status,
    defaultEnabled: website.default_enabled,
    selectionRules: website.selection_rules.map((r) => ({ kind: r.kind, key: r.key, enabled: r.enabled })),
    currentGenerationId: website.current_generation_id ?? undefined,
    totalPages: pages.length,
    enabledPages: enabled.length,
    pages: pages.slice(0, 500).map((p) => ({
      sourceId: p.id,
      url: p.url,
      canonicalUrl: p.canonical_url,
      path: p.path,
      enabled: p.enabled,
      chunkCount: p.chunk_count,
      tokens: p.tokens,
      displayOrder: p.display_order ?? undefined,
      updatedAt: iso(p.updated_at),
    })),
    createdAt: iso(website.created_at),
    updatedAt: iso(website.updated_at),
    lastCrawledAt: iso(website.last_crawled_at),
  };
}

/** An asset folder; `sharePath` (an extension) is the signed public link while the folder is active. */
export function folderView(row: FolderRow, assetOrder: string[], sharePath: string | undefined) {
  return {
    folderId: row.id,
    title: row.title,
    active: row.active,
    shareTokenVersion: row.share_token_version,
    assetOrder,
    assetCount: assetOrder.length,
    description: row.description ?? undefined,
    propertyId: row.property_id ?? undefined,
    propertyName: row.property_name ?? undefined,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    sharePath,
  };
}
