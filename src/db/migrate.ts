import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Db } from './driver.js';

const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function listMigrations(): Migration[] {
  const migrations = readdirSync(migrationsDir)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({ version: Number(file.slice(0, 4)), name: file, sql: readFileSync(path.join(migrationsDir, file), 'utf8') }));
  // Two branches may each add the next number; the second file would be skipped as applied.
  migrations.forEach((migration, i) => {
    if (i > 0 && migrations[i - 1].version === migration.version) throw new Error(`two migrations share version ${migration.version}: ${migrations[i - 1].name}, ${migration.name}`);
  });
  return migrations;
}

/**
 * Applies pending migrations in one transaction under a transaction-scoped advisory lock,
 * so nodes starting together apply each migration exactly once. The lock is database-wide (not per
 * schema) because extensions such as pg_trgm are database-wide too. The pending migrations and their
 * bookkeeping go to the database as one text: a fresh schema is one round trip, not two per migration,
 * and runs while the server's code loads instead of waiting for the event loop between statements.
 */
export async function migrate(db: Db): Promise<number[]> {
  const migrations = listMigrations();
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['m2m-migrations']);
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await tx.query<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => r.version));
    const pending = migrations.filter((migration) => !done.has(migration.version));
    if (pending.length === 0) return [];
    // Versions and names are the files' own (listMigrations accepts only digits, lower-case letters and '_').
    await tx.exec(pending.map((m) => `${m.sql}\n;\nINSERT INTO schema_migrations (version, name) VALUES (${m.version}, '${m.name}');`).join('\n'));
    return pending.map((migration) => migration.version);
  });
}

let knownMigrations: number | undefined;

/** True when every migration this build knows has been applied (readiness: the files are read once). */
export async function migrationsApplied(db: Db): Promise<boolean> {
  knownMigrations ??= listMigrations().length;
  const rows = await db.query<{ count: number }>('SELECT count(*)::int AS count FROM schema_migrations');
  return (rows[0]?.count ?? 0) >= knownMigrations;
}
