import type { Db } from '../db/driver.js';
import { inboxListStatement, type InboxPage, type InboxPageRequest, type InboxRow, type ListFilter } from './search-sql.js';

type CountedRow = Partial<InboxRow> & { inbox_total: number; inbox_unread: number; inbox_needs_reply: number; inbox_capped: boolean };

export const inboxSearchRepo = {
  /**
   * One page, newest activity first, keyset after `after`, and the inbox counts of the whole filter (not just
   * the page), in one statement (search-sql.ts). The counts come on the first row.
   */
  async listWithCounts(db: Pick<Db, 'query'>, filter: ListFilter, page: InboxPageRequest): Promise<InboxPage> {
    const { text, params, searching } = inboxListStatement(filter, page);
    // Unsearched, the best plan is the same for every tenant and filter value (the inbox indexes): a cached
    // generic plan. A search's best plan depends on its pattern (a rare name reads the trigram index, a common
    // fragment walks the newest conversations), so it is planned for its values on every call.
    const rows = await db.query<CountedRow>(text, params, { cachedPlan: !searching });
    const first = rows[0];
    return {
      rows: rows.filter((row): row is CountedRow & InboxRow => row.id !== null && row.id !== undefined),
      counts: { total: first?.inbox_total ?? 0, unread: first?.inbox_unread ?? 0, needsReply: first?.inbox_needs_reply ?? 0 },
      countsCapped: first?.inbox_capped ?? false,
    };
  },
};
