import type { Db } from '../db/driver.js';
import { inboxListStatement, type InboxPage, type InboxPageRequest, type InboxRow, type ListFilter } from './search-sql.js';

type CountedRow = Partial<InboxRow> & { inbox_total: number; inbox_unread: number; inbox_needs_reply: number; inbox_capped: boolean };

export const inboxSearchRepo = {
  /**
   * One page, newest activity first, keyset after `after`, and the inbox counts of the whole filter (not just
   * the page), in one statement (search-sql.ts). The counts come on the first row.
   */
  async listWithCounts(db: Pick<Db, 'query'>, filter: ListFilter, page: InboxPageRequest): Promise<InboxPage> {
    const { text, params } = inboxListStatement(filter, page);
    const rows = await db.query<CountedRow>(text, params);
    const first = rows[0];
    return {
      rows: rows.filter((row): row is CountedRow & InboxRow => row.id !== null && row.id !== undefined),
      counts: { total: first?.inbox_total ?? 0, unread: first?.inbox_unread ?? 0, needsReply: first?.inbox_needs_reply ?? 0 },
      countsCapped: first?.inbox_capped ?? false,
    };
  },
};
