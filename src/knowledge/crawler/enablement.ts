import type { Tx } from '../../db/driver.js';
import type { CrawlWebsite } from './crawl-repo.js';
import { isEnabled } from './selection.js';
import { snapshotRepo, type SnapshotPage } from './snapshot-repo.js';
import { pageKey } from './url.js';

export interface GenerationTotals {
  pages: SnapshotPage[];
  /** Chunks of every page, enabled or not. */
  chunks: number;
  /** Chunks and tokens of enabled pages (the website row's counters). */
  enabledChunks: number;
  enabledTokens: number;
}

/**
 * Sets every page's `enabled` of a generation from the website's selection rules as they are now, and
 * returns the generation's totals. Runs when a crawl finalizes and when a website's rules change.
 */
export async function applySelection(tx: Tx, website: CrawlWebsite, generationId: string, now: Date): Promise<GenerationTotals> {
  const root = new URL(website.root_url);
  const pages = await snapshotRepo.pages(tx, generationId);
  const flips: Record<'on' | 'off', string[]> = { on: [], off: [] };
  const totals = { chunks: 0, enabledChunks: 0, enabledTokens: 0 };
  for (const page of pages) {
    const enabled = isEnabled(
      { url: pageKey(new URL(page.url)), canonicalUrl: page.canonical_url, path: page.path },
      website.selection_rules,
      website.default_enabled,
      root,
    );
    if (enabled !== page.enabled) flips[enabled ? 'on' : 'off'].push(page.id);
    totals.chunks += page.chunk_count;
    if (enabled) {
      totals.enabledChunks += page.chunk_count;
      totals.enabledTokens += page.tokens;
    }
  }
  await snapshotRepo.setEnabled(tx, website.tenant_id, flips.on, true, now);
  await snapshotRepo.setEnabled(tx, website.tenant_id, flips.off, false, now);
  return { pages, ...totals };
}
