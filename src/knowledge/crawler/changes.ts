import type { Static } from 'typebox';
import type { ChangedPage, CrawlChanges } from './schema.js';

/** Most changed pages a crawl job lists (decisions 6.4). */
export const MAX_CHANGED_PAGES = 500;

/** A page of a generation as the comparison sees it. */
export interface PageVersion {
  url: string;
  canonical_url: string;
  content_hash: string | null;
}

/**
 * What a crawl changed against the previous current generation, page by canonical URL and text hash: counts
 * of new, changed, same and removed pages, and the new, changed and removed pages themselves (new and
 * changed in the new generation's order, then removed ones in the old order; at most 500).
 */
export function compareGenerations(
  previous: readonly PageVersion[],
  next: readonly PageVersion[],
): { changes: Static<typeof CrawlChanges>; changedPages: Array<Static<typeof ChangedPage>> } {
  const before = new Map(previous.map((p) => [p.canonical_url, p]));
  const after = new Set(next.map((p) => p.canonical_url));
  const changes = { new: 0, changed: 0, same: 0, removed: 0 };
  const changedPages: Array<Static<typeof ChangedPage>> = [];
  const list = (url: string, changeStatus: 'new' | 'changed' | 'removed') => {
    if (changedPages.length < MAX_CHANGED_PAGES) changedPages.push({ url, changeStatus });
  };
  for (const page of next) {
    const old = before.get(page.canonical_url);
    if (!old) {
      changes.new += 1;
      list(page.url, 'new');
    } else if (old.content_hash === null || old.content_hash !== page.content_hash) {
      changes.changed += 1;
      list(page.url, 'changed');
    } else {
      changes.same += 1;
    }
  }
  for (const page of previous) {
    if (after.has(page.canonical_url)) continue;
    changes.removed += 1;
    list(page.url, 'removed');
  }
  return { changes, changedPages };
}
