import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../../src/db/driver.js';
import { sharedDatabase } from '../helpers/shared-db.js';
import { pageLimit } from '../../src/db/sql.js';

// The planner is left as the server configures it: no connection of ours carries planner settings of its own.

let database: Awaited<ReturnType<typeof sharedDatabase>>;
let db: Db;

before(async () => {
  database = await sharedDatabase();
  db = await database.open();
});
after(async () => {
  await db.close();
  await database.drop();
});

test("the database's connections keep the server's planner settings", async () => {
  // Nothing in the code tunes the planner per connection or per session (enable_*, jit, plan_cache_mode, …).
  const tuned = await db.query<{ name: string; source: string }>(
    `SELECT name, source FROM pg_settings WHERE category LIKE 'Query Tuning%' AND source IN ('client', 'session') ORDER BY name`,
  );
  assert.deepEqual(tuned, []);
});

test('only the job claim sets planner settings, the ones its decision records', async () => {
  // docs/decisions.md, "The one planner setting": the queue outgrows its statistics during a burst.
  const tuned = await db.query<{ name: string; config: string[] }>(
    `SELECT proname AS name, proconfig AS config FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND proconfig IS NOT NULL ORDER BY proname`,
  );
  assert.deepEqual(tuned, [{ name: 'jobs_claim', config: ['enable_sort=off', 'enable_bitmapscan=off', 'jit=off'] }]);
});

test('a page size is written into a statement only when it is one', () => {
  // The messages page writes its size in the text so that its kept plan knows it (src/db/sql.ts, pageLimit).
  assert.equal(pageLimit(26), '26');
  assert.equal(pageLimit(1), '1');
  for (const bad of [0, -1, 1001, 2.5, Number.NaN, Number.POSITIVE_INFINITY]) assert.throws(() => pageLimit(bad), RangeError);
});
