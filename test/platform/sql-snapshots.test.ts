import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Db } from '../../src/db/driver.js';
import { inboxListStatement, type InboxPageRequest, type ListFilter } from '../../src/conversations/search-sql.js';
import { inboxSearchRepo } from '../../src/conversations/search-repo.js';
import { sharedDatabase } from '../helpers/shared-db.js';

// Every SQL variant the inbox list builds, kept as reviewed text: a change to a query shows up in the diff of
// test/fixtures/sql-snapshots/inbox-list.sql. After a deliberate change, regenerate it:
//   UPDATE_SQL_SNAPSHOTS=1 node --import tsx --test test/platform/sql-snapshots.test.ts
const SNAPSHOT = fileURLToPath(new URL('../fixtures/sql-snapshots/inbox-list.sql', import.meta.url));

const tenantId = 'ten_snapshot';
const cursorAt = { at: '2026-01-02T03:04:05.678901Z', id: 'cnv_after' };
const page = (extra: Partial<InboxPageRequest> = {}): InboxPageRequest => ({ limit: 26, countCap: 100, ...extra });

const VARIANTS: Array<{ name: string; filter: ListFilter; page: InboxPageRequest }> = [
  { name: 'unsearched, first page', filter: { tenantId, patterns: [] }, page: page() },
  { name: 'unsearched, next page', filter: { tenantId, patterns: [] }, page: page({ after: cursorAt }) },
  { name: 'unsearched, channel and owner, first page', filter: { tenantId, patterns: [], channel: 'whatsapp', ownerOperatorId: 'op_1' }, page: page() },
  { name: 'unsearched, channel and owner, next page', filter: { tenantId, patterns: [], channel: 'whatsapp', ownerOperatorId: 'op_1' }, page: page({ after: cursorAt }) },
  { name: 'search by name, first page', filter: { tenantId, patterns: ['%anna%'] }, page: page() },
  { name: 'search by name, next page', filter: { tenantId, patterns: ['%anna%'] }, page: page({ after: cursorAt }) },
  { name: 'search by phone digits and prefix, first page', filter: { tenantId, patterns: ['%5512%', '%55 12%'], phonePrefix: '+5512' }, page: page() },
  { name: 'search by phone prefix only, channel and owner, next page', filter: { tenantId, patterns: [], phonePrefix: '+49', channel: 'webchat', ownerOperatorId: 'op_2' }, page: page({ after: cursorAt }) },
];

function render(): string {
  const parts = VARIANTS.map(({ name, filter, page: request }) => {
    const { text, params } = inboxListStatement(filter, request);
    const bound = params.map((value, i) => `-- $${i + 1} = ${JSON.stringify(value)}`).join('\n');
    return `-- ${name}\n${bound}\n${text.replace(/[ \t]+$/gm, '')};\n`;
  });
  return parts.join('\n');
}

test('inbox list SQL: every variant matches the reviewed snapshot', () => {
  const current = render();
  if (process.env.UPDATE_SQL_SNAPSHOTS === '1') writeFileSync(SNAPSHOT, current);
  assert.equal(current, readFileSync(SNAPSHOT, 'utf8'), 'the generated SQL changed: review it and regenerate the snapshot (see the top of this file)');
});

let database: Awaited<ReturnType<typeof sharedDatabase>>;
let db: Db;
before(async () => {
  database = await sharedDatabase();
  db = await database.open();
});
after(async () => {
  await db?.close();
  await database?.drop();
});

test('inbox list SQL: every variant runs on this database (an empty tenant: no rows, zero counts)', async () => {
  for (const { name, filter, page: request } of VARIANTS) {
    const result = await inboxSearchRepo.listWithCounts(db, filter, request);
    assert.deepEqual(result, { rows: [], counts: { total: 0, unread: 0, needsReply: 0 }, countsCapped: false }, name);
  }
});

test('inbox list SQL: a page larger than the count cap is refused', () => {
  assert.throws(() => inboxListStatement({ tenantId, patterns: ['%a%'] }, { limit: 102, countCap: 100 }), /count cap 100 is smaller than a page of 101/);
});
