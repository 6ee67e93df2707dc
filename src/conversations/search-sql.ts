import { olderThan } from '../db/sql.js';
import type { ConversationRow, InboxCounts } from './repo.js';

/**
 * The inbox list statement (a page plus its inbox counts) and its fragments. Only text and parameters are
 * made here, so every variant can be snapshot-tested as SQL (test/sql-snapshots.test.ts); search-repo.ts runs it.
 */

export interface ListFilter {
  tenantId: string;
  channel?: string;
  ownerOperatorId?: string;
  /** LIKE patterns (already escaped) any of which must match the contact's search_text. */
  patterns: string[];
  /** "+" and digits: the contact's E.164 phone must start with it. */
  phonePrefix?: string;
}

function filterSql(filter: ListFilter, params: unknown[]): string {
  params.push(filter.tenantId);
  const tenant = `$${params.length}`;
  const where = [`c.tenant_id = ${tenant}`];
  if (filter.channel) {
    params.push(filter.channel);
    where.push(`c.channel_kind = $${params.length}`);
  }
  if (filter.ownerOperatorId) {
    params.push(filter.ownerOperatorId);
    where.push(`c.owner_operator_id = $${params.length}`);
  }
  if (filter.patterns.length > 0) {
    const ors = filter.patterns.map((pattern) => {
      params.push(pattern);
      return `k.search_text LIKE $${params.length}`;
    });
    where.push(`c.contact_id IN (SELECT k.id FROM contacts k WHERE k.tenant_id = ${tenant} AND (${ors.join(' OR ')}))`);
  }
  if (filter.phonePrefix) {
    params.push(`${filter.phonePrefix}%`);
    where.push(`c.contact_phone LIKE $${params.length}`);
  }
  return where.join(' AND ');
}

/** The columns a list item shows. */
export type InboxRow = Pick<
  ConversationRow,
  | 'id'
  | 'channel_kind'
  | 'channel_id'
  | 'contact_id'
  | 'contact_name'
  | 'contact_phone'
  | 'owner_operator_id'
  | 'unread_count'
  | 'needs_reply'
  | 'last_message_at'
  | 'last_message_preview'
  | 'open_review_id'
  | 'open_handoff_id'
  | 'created_at'
>;

const INBOX_COLUMNS = `c.id, c.channel_kind, c.channel_id, c.contact_id, c.contact_name, c.contact_phone, c.owner_operator_id, c.unread_count,
  c.needs_reply, c.last_message_at, c.last_message_preview, c.open_review_id, c.open_handoff_id, c.created_at`;

export interface InboxPage {
  rows: InboxRow[];
  counts: InboxCounts;
  /**
   * A contact search matched more than the count cap: the counts describe the cap's worth of most recently
   * active matches (`total` is the cap; `unread` and `needsReply` are lower bounds).
   */
  countsCapped: boolean;
}

/** The inbox counts of an unsearched filter: a sum over the tenant's few counter rows. */
function counterCountsSql(filter: ListFilter, params: unknown[]): string {
  params.push(filter.tenantId);
  const where = [`tenant_id = $${params.length}`];
  if (filter.channel) {
    params.push(filter.channel);
    where.push(`channel_kind = $${params.length}`);
  }
  if (filter.ownerOperatorId) {
    params.push(filter.ownerOperatorId);
    where.push(`owner_key = $${params.length}`);
  }
  return `SELECT coalesce(sum(total), 0)::int AS inbox_total, coalesce(sum(unread), 0)::int AS inbox_unread,
            coalesce(sum(needs_reply), 0)::int AS inbox_needs_reply, false AS inbox_capped
          FROM inbox_counters WHERE ${where.join(' AND ')}`;
}

/** The most recently active matches of a contact search, numbered, at most `cap` + 1 (to know whether there are more). */
function searchScanSql(filter: ListFilter, columns: string, capParam: string, params: unknown[]): string {
  return `SELECT row_number() OVER (ORDER BY c.last_message_at DESC, c.id DESC) AS n, ${columns}
          FROM conversations c WHERE ${filterSql(filter, params)}
          ORDER BY c.last_message_at DESC, c.id DESC LIMIT ${capParam}::int + 1`;
}

/**
 * The inbox counts of a contact search, over at most `cap` matches (the most recently active): the work is
 * bounded by the cap, not by how many conversations a short fragment matches.
 */
function searchCountsSql(filter: ListFilter, cap: number, params: unknown[]): string {
  params.push(cap);
  const capParam = `$${params.length}`;
  return `SELECT count(*) FILTER (WHERE m.n <= ${capParam})::int AS inbox_total,
            count(*) FILTER (WHERE m.n <= ${capParam} AND m.unread_count > 0)::int AS inbox_unread,
            count(*) FILTER (WHERE m.n <= ${capParam} AND m.needs_reply)::int AS inbox_needs_reply,
            count(*) > ${capParam} AS inbox_capped
          FROM (${searchScanSql(filter, 'c.unread_count, c.needs_reply', capParam, params)}) m`;
}

/**
 * A search's first page and its counts from one scan: the page is the first `limit` of the counted matches.
 * The counts ride on the first row only (the others carry NULLs, which cost nothing to send or parse).
 */
function firstSearchPageSql(filter: ListFilter, cap: number, limit: number, params: unknown[]): string {
  params.push(cap);
  const capParam = `$${params.length}`;
  const scan = searchScanSql(filter, INBOX_COLUMNS, capParam, params);
  params.push(limit);
  const onFirstRow = (value: string) => `CASE WHEN m.n = 1 THEN ${value} END`;
  return `SELECT ${INBOX_COLUMNS.replace(/\bc\./g, 'm.')},
            ${onFirstRow(`(count(*) FILTER (WHERE m.n <= ${capParam}) OVER ())::int`)} AS inbox_total,
            ${onFirstRow(`(count(*) FILTER (WHERE m.n <= ${capParam} AND m.unread_count > 0) OVER ())::int`)} AS inbox_unread,
            ${onFirstRow(`(count(*) FILTER (WHERE m.n <= ${capParam} AND m.needs_reply) OVER ())::int`)} AS inbox_needs_reply,
            ${onFirstRow(`count(*) OVER () > ${capParam}`)} AS inbox_capped
          FROM (${scan}) m
          ORDER BY m.n LIMIT $${params.length}`;
}

export interface InboxPageRequest {
  limit: number;
  after?: { at: string; id: string };
  countCap: number;
}

export interface InboxStatement {
  text: string;
  params: unknown[];
}

/**
 * The page (`limit` rows after `after`) and the inbox counts of the filter, in one statement. Without a
 * contact search the counts come from the maintained counters (migration 0011); with one they count the
 * matching conversations, at most `countCap` of them (`InboxPage.countsCapped`): on a search's first page
 * the page is the start of that same scan.
 */
export function inboxListStatement(filter: ListFilter, page: InboxPageRequest): InboxStatement {
  // A search's first page is cut from the counted scan, so the scan must reach past a full page.
  if (page.limit > page.countCap + 1) throw new Error(`count cap ${page.countCap} is smaller than a page of ${page.limit - 1}`);
  const params: unknown[] = [];
  const searching = filter.patterns.length > 0 || filter.phonePrefix !== undefined;
  let sql: string;
  if (searching && !page.after) {
    sql = firstSearchPageSql(filter, page.countCap, page.limit, params);
  } else {
    const counts = searching ? searchCountsSql(filter, page.countCap, params) : counterCountsSql(filter, params);
    let pageWhere = filterSql(filter, params);
    if (page.after) {
      pageWhere += ` AND ${olderThan(params, 'c.last_message_at', 'c.id', page.after)}`;
    }
    params.push(page.limit);
    sql = `SELECT k.*, p.* FROM (${counts}) k LEFT JOIN LATERAL (
             SELECT ${INBOX_COLUMNS} FROM conversations c
             WHERE ${pageWhere} ORDER BY c.last_message_at DESC, c.id DESC LIMIT $${params.length}
           ) p ON true
           ORDER BY p.last_message_at DESC, p.id DESC`;
  }
  return { text: sql, params };
}
