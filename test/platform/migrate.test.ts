import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDb, type Db } from '../../src/db/driver.js';
import { listMigrations, migrate, migrationsApplied } from '../../src/db/migrate.js';
import { isolatedDatabase } from '../helpers/db.js';

test('a fresh database gets every migration once, in order, even from two nodes starting together', { timeout: 120_000 }, async () => {
  const isolated = await isolatedDatabase();
  const open = (): Promise<Db> =>
    openDb({ databaseUrl: isolated.env.DATABASE_URL, schema: isolated.env.DATABASE_SCHEMA, dataDir: isolated.env.DATA_DIR ?? '' });
  const first = await open();
  // PGlite is one connection in this process: the second "node" is the same database.
  const second = first.kind === 'postgres' ? await open() : first;
  try {
    const known = listMigrations();
    assert.equal(await migrationsApplied(first).catch(() => false), false, 'nothing applied yet');

    const [a, b] = await Promise.all([migrate(first), migrate(second)]);
    const applied = [...a, ...b];
    assert.deepEqual(applied, known.map((m) => m.version), 'each migration applied by exactly one of the two');
    assert.ok(a.length === 0 || b.length === 0, 'one node applied them all, in one transaction');

    const rows = await first.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
    assert.deepEqual(rows, known.map((m) => ({ version: m.version, name: m.name })));
    // The migrations' statements ran, not only their bookkeeping rows: an index made by 0020 exists.
    const [index] = await first.query<{ found: string | null }>("SELECT to_regclass('webhook_deliveries_failed')::text AS found");
    assert.ok(index.found, 'the index made by migration 0020 exists');

    assert.deepEqual(await migrate(first), [], 'a second start applies nothing');
    assert.equal(await migrationsApplied(first), true);
  } finally {
    if (second !== first) await second.close();
    await first.close();
    await isolated.drop();
  }
});
