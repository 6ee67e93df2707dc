import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Db } from './driver.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const migrationsDir = path.join(here, 'migrations');
/** The source root (src/, or dist/src/ once built): function files sit in `<domain>/sql/` below it. */
const sourceRoot = path.join(here, '..');

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/**
 * A database function as it is now, in one file of its own (`src/<domain>/sql/<name>.sql`, `CREATE OR REPLACE`):
 * a repeatable definition, applied after the numbered migrations whenever its checksum differs from the one
 * recorded when it was last applied.
 */
export interface FunctionFile {
  /** The file's name without `.sql`: the function it defines (overloads of one name share the file). */
  name: string;
  /** Relative to the source root, for messages. */
  file: string;
  sql: string;
  checksum: string;
}

export interface Applied {
  /** Versions of the migrations applied. */
  migrations: number[];
  /** Names of the function files (re-)applied, in the order they were. */
  functions: string[];
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

export function checksumOf(sql: string): string {
  return createHash('sha256').update(sql).digest('hex');
}

/** Every function file of every domain, in an order that creates what a function calls before it (see orderByCalls). */
export function listFunctions(): FunctionFile[] {
  const files: FunctionFile[] = [];
  for (const domain of readdirSync(sourceRoot, { withFileTypes: true })) {
    const dir = path.join(sourceRoot, domain.name, 'sql');
    if (!domain.isDirectory() || !existsSync(dir)) continue;
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.sql'))) {
      if (!/^[a-z][a-z0-9_]*\.sql$/.test(file)) throw new Error(`a function file is named after its function in lower case: ${domain.name}/sql/${file}`);
      const sql = readFileSync(path.join(dir, file), 'utf8');
      files.push({ name: file.slice(0, -4), file: `${domain.name}/sql/${file}`, sql, checksum: checksumOf(sql) });
    }
  }
  files.forEach((f, i) => {
    const twin = files.findIndex((other) => other.name === f.name);
    if (twin !== i) throw new Error(`two function files define ${f.name}: ${files[twin].file}, ${f.file}`);
  });
  return orderByCalls(files);
}

const byFileName = (a: FunctionFile, b: FunctionFile): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** The files whose functions `sql` calls: a file's name followed by `(`, outside comments. */
function calledBy(sql: string, files: readonly FunctionFile[]): FunctionFile[] {
  const code = sql.replace(/--[^\n]*/g, '');
  return files.filter((f) => new RegExp(`\\b${f.name}\\s*\\(`).test(code));
}

/**
 * The text of a migration in which a call is a use: none in the early migrations that still defined functions
 * (0001-0027, history: the files replace those definitions after them), and none in a statement about a function
 * itself (`ALTER`, `DROP`, `COMMENT ON FUNCTION`).
 */
function usesOf(migration: Migration): string {
  if (DEFINES_FUNCTION.test(migration.sql)) return '';
  return migration.sql.replace(/--[^\n]*/g, '').replace(/(ALTER|DROP|COMMENT\s+ON)\s+FUNCTION[^;]*;/gi, '');
}

/** A migration that defines a function (only the early ones, before functions had files of their own). */
export const DEFINES_FUNCTION = /CREATE\s+(OR\s+REPLACE\s+)?FUNCTION/i;

/** `needed` and every file they call, directly or not, in the order of `files` (which creates callees first). */
function withCallees(needed: readonly FunctionFile[], files: readonly FunctionFile[]): FunctionFile[] {
  const names = new Set(needed.map((f) => f.name));
  for (let grew = true; grew; ) {
    grew = false;
    for (const f of files.filter((file) => names.has(file.name))) {
      for (const callee of calledBy(f.sql, files)) {
        if (names.has(callee.name)) continue;
        names.add(callee.name);
        grew = true;
      }
    }
  }
  return files.filter((f) => names.has(f.name));
}

/**
 * Orders the files so that a function is created after every function it calls: a SQL-language function's body
 * is checked when it is created, so what it calls must exist by then (api_key_grants calls api_key_in_force). A
 * call is the name of another file's function followed by `(`, outside comments. Ties go by name, so the order
 * never depends on the file system's.
 */
export function orderByCalls(files: readonly FunctionFile[]): FunctionFile[] {
  const byName = new Map(files.map((f) => [f.name, f]));
  const calls = new Map(files.map((f) => [f.name, calledBy(f.sql, files).filter((other) => other !== f).sort(byFileName)]));
  const ordered: FunctionFile[] = [];
  const placing = new Set<string>();
  const place = (f: FunctionFile, chain: string[]): void => {
    if (ordered.includes(f)) return;
    if (placing.has(f.name)) throw new Error(`function files call each other in a cycle: ${[...chain, f.name].join(' → ')}`);
    placing.add(f.name);
    for (const callee of calls.get(f.name) ?? []) place(callee, [...chain, f.name]);
    placing.delete(f.name);
    ordered.push(f);
  };
  for (const f of [...byName.values()].sort(byFileName)) place(f, []);
  return ordered;
}

/**
 * Applies pending migrations, then the function files whose checksum changed, in one transaction under a
 * transaction-scoped advisory lock, so nodes starting together apply each exactly once. The lock is database-wide
 * (not per schema) because extensions such as pg_trgm are database-wide too. What is pending and its bookkeeping
 * go to the database as one text: a fresh schema is one round trip, not two per file, and runs while the
 * server's code loads instead of waiting for the event loop between statements.
 *
 * Functions come after the migrations: a migration changes tables and types, and a function file is written
 * against the schema as the migrations leave it. A migration never restates a function body: one that uses a
 * function (a generated column's expression) gets that file, with what it calls, applied just before it.
 */
export async function migrateAll(db: Db, source: { migrations: Migration[]; functions: FunctionFile[] } = { migrations: listMigrations(), functions: listFunctions() }): Promise<Applied> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['m2m-migrations']);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE IF NOT EXISTS schema_functions (
      name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await tx.query<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => r.version));
    const recorded = new Map((await tx.query<{ name: string; checksum: string }>('SELECT name, checksum FROM schema_functions')).map((r) => [r.name, r.checksum]));
    const migrations = source.migrations.filter((migration) => !done.has(migration.version));
    let pending = source.functions.filter((f) => recorded.get(f.name) !== f.checksum);
    if (migrations.length === 0 && pending.length === 0) return { migrations: [], functions: [] };
    const applied: FunctionFile[] = [];
    // Versions, names and checksums are the files' own (names are digits, lower-case letters and '_'; checksums hex).
    const apply = (files: FunctionFile[]) => {
      applied.push(...files);
      pending = pending.filter((f) => !files.includes(f));
      return files.map(
        (f) =>
          `${f.sql}\n;\nINSERT INTO schema_functions (name, checksum) VALUES ('${f.name}', '${f.checksum}')
           ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now();`,
      );
    };
    const script: string[] = [];
    for (const m of migrations) {
      // A migration that uses a function (a generated column's expression) gets it from its file just before.
      script.push(...apply(withCallees(calledBy(usesOf(m), pending), pending)));
      script.push(`${m.sql}\n;\nINSERT INTO schema_migrations (version, name) VALUES (${m.version}, '${m.name}');`);
    }
    script.push(...apply(pending));
    await tx.exec(script.join('\n'));
    return { migrations: migrations.map((m) => m.version), functions: applied.map((f) => f.name) };
  });
}

/** migrateAll, answering the versions of the migrations it applied. */
export async function migrate(db: Db): Promise<number[]> {
  return (await migrateAll(db)).migrations;
}

let known: { migrations: number; names: string[]; checksums: string[] } | undefined;

/**
 * True when every migration this build knows has been applied and every function file is in force as this build
 * has it (readiness: the files are read once).
 */
export async function migrationsApplied(db: Db): Promise<boolean> {
  if (!known) {
    const functions = listFunctions();
    known = { migrations: listMigrations().length, names: functions.map((f) => f.name), checksums: functions.map((f) => f.checksum) };
  }
  const rows = await db.query<{ migrations: number; functions: number }>(
    `SELECT (SELECT count(*)::int FROM schema_migrations) AS migrations,
            (SELECT count(*)::int FROM schema_functions f JOIN unnest($1::text[], $2::text[]) AS k (name, checksum)
               ON k.name = f.name AND k.checksum = f.checksum) AS functions`,
    [known.names, known.checksums],
  );
  return (rows[0]?.migrations ?? 0) >= known.migrations && rows[0]?.functions === known.names.length;
}
