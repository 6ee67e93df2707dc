import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb } from '../../src/db/driver.js';
import { listMigrations, migrate } from '../../src/db/migrate.js';
import { compactTemplateWal, seedFromTemplate, stampTemplate } from '../../src/db/pglite-template.js';

// The embedded database template that `npm run build` ships (dist/pglite-template): an empty DATA_DIR starts
// from a copy of it instead of running initdb.

test('an empty data directory starts from the template; a used one, or another PGlite version\'s template, is left alone', { timeout: 180_000 }, async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'm2m-template-'));
  try {
    const template = path.join(root, 'template');
    const built = await openDb({ dataDir: template, templateDir: path.join(root, 'none') });
    assert.equal((await migrate(built)).length, listMigrations().length);
    await compactTemplateWal(built);
    await built.close();
    stampTemplate(template);
    // One WAL segment is left, stored without its zero tail and copied back to its full 16 MB.
    const segments = readdirSync(path.join(template, 'pgdata', 'pg_wal')).filter((name) => /^[0-9A-F]{24}$/.test(name));
    assert.equal(segments.length, 1);
    assert.ok(statSync(path.join(template, 'pgdata', 'pg_wal', segments[0])).size < 1024 * 1024);

    const dataDir = path.join(root, 'data');
    const db = await openDb({ dataDir, templateDir: template });
    try {
      assert.ok(existsSync(path.join(dataDir, 'pgdata', 'PG_VERSION')));
      assert.equal(statSync(path.join(dataDir, 'pgdata', 'pg_wal', segments[0])).size, 16 * 1024 * 1024);
      assert.deepEqual(await migrate(db), [], 'the copy is already migrated');
      const rows = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
      assert.equal(rows[0].n, listMigrations().length);
      // No secret or tenant comes with the template: only the schema.
      assert.equal((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM app_secrets'))[0].n, 0);
      assert.equal((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants'))[0].n, 0);
      await db.query(`INSERT INTO app_secrets (name, value) VALUES ('marker', 'x')`);
    } finally {
      await db.close();
    }
    // A data directory in use is never overwritten.
    assert.equal(await seedFromTemplate(path.join(dataDir, 'pgdata'), template), false);
    const reopened = await openDb({ dataDir, templateDir: template });
    assert.equal((await reopened.query<{ n: number }>(`SELECT count(*)::int AS n FROM app_secrets WHERE name = 'marker'`))[0].n, 1);
    await reopened.close();

    // A template stamped by another PGlite version is not used.
    const stamp = path.join(template, 'm2m-template.json');
    writeFileSync(stamp, JSON.stringify({ pglite: '0.0.1' }));
    const empty = path.join(root, 'other');
    mkdirSync(empty);
    assert.equal(await seedFromTemplate(empty, template), false);
    assert.equal(existsSync(path.join(empty, 'PG_VERSION')), false);
    assert.match(readFileSync(stamp, 'utf8'), /0\.0\.1/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
