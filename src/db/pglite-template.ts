import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { truncate } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/**
 * A fresh embedded database spends seconds in PGlite's initdb (and the memory it leaves behind stays in the
 * process). `npm run build` therefore makes one migrated, empty database (no tenant, no secret: only the
 * schema) and ships it in dist/; a server whose data directory is empty starts from a copy of it, then applies
 * any migration newer than the copy, and any function file changed since, as usual (src/db/migrate.ts). A copy made by another PGlite version is never used.
 */
export const BUILT_TEMPLATE_DIR = fileURLToPath(new URL('../../pglite-template', import.meta.url));

const STAMP = 'm2m-template.json';

interface Stamp {
  pglite: string;
  /** Files stored without their zero tail (WAL segments), by path inside pgdata: their real length. */
  lengths?: Record<string, number>;
}

function pgliteVersion(): string {
  // The package does not export its package.json: it is found from the entry point's location.
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  const marker = `${path.sep}node_modules${path.sep}@electric-sql${path.sep}pglite${path.sep}`;
  const manifest = JSON.parse(readFileSync(`${entry.slice(0, entry.lastIndexOf(marker) + marker.length)}package.json`, 'utf8')) as { version?: unknown };
  return String(manifest.version);
}

function readStamp(templateDir: string): Stamp | undefined {
  const file = path.join(templateDir, STAMP);
  if (!existsSync(file)) return undefined;
  const stamp = JSON.parse(readFileSync(file, 'utf8')) as Partial<Stamp>;
  return typeof stamp.pglite === 'string' ? { pglite: stamp.pglite, lengths: stamp.lengths } : undefined;
}

// CommonJS source, so that it runs the same under the TypeScript loader and from the compiled build.
const COPY_TREE_SOURCE = `
const { mkdirSync, readdirSync, statSync, copyFileSync } = require('node:fs');
const path = require('node:path');
const { workerData } = require('node:worker_threads');
const copy = (from, to) => {
  mkdirSync(to, { recursive: true, mode: statSync(from).mode });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) copy(source, target);
    else copyFileSync(source, target);
  }
};
copy(workerData.from, workerData.to);
`;

/**
 * Copies in a thread of its own: the copy (about a thousand small files) then runs beside the server's code
 * loading, instead of waiting for the busy event loop between files.
 */
function copyTree(from: string, to: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(COPY_TREE_SOURCE, { eval: true, workerData: { from, to } });
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`template copy exited with code ${code}`))));
  });
}

/**
 * Copies the template into `dataDir` when it is empty and the template was made by the installed PGlite.
 * The server's code loads while the files are written.
 */
export async function seedFromTemplate(dataDir: string, templateDir: string): Promise<boolean> {
  if (existsSync(path.join(dataDir, 'PG_VERSION')) || readdirSync(dataDir).length > 0) return false;
  const stamp = readStamp(templateDir);
  if (stamp?.pglite !== pgliteVersion()) return false;
  await copyTree(path.join(templateDir, 'pgdata'), dataDir);
  // Back to full length: the zero tail becomes a hole, read as zeros, never written.
  await Promise.all(Object.entries(stamp.lengths ?? {}).map(([file, length]) => truncate(path.join(dataDir, file), length)));
  return true;
}

/**
 * Run on the template database before it is closed: a checkpoint in a new WAL segment, with the old segments
 * removed instead of kept for reuse, leaves one segment holding little more than the checkpoint record (the
 * migrations' WAL, ~10 MB of a 16 MB segment, is no longer needed once their pages are written).
 */
export async function compactTemplateWal(db: { query(sql: string): Promise<unknown> }): Promise<void> {
  await db.query('SET wal_recycle = off');
  await db.query('CHECKPOINT');
  await db.query('SELECT pg_switch_wal()');
  await db.query('CHECKPOINT');
}

/**
 * Marks `templateDir` (holding a closed, migrated `pgdata`) as made by the installed PGlite, and stores its WAL
 * segments without their zero tails (16 MB each on disk, almost all zeros after compactTemplateWal), which
 * every start would otherwise copy.
 */
export function stampTemplate(templateDir: string): void {
  const lengths: Record<string, number> = {};
  const walDir = path.join(templateDir, 'pgdata', 'pg_wal');
  for (const entry of readdirSync(walDir, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(walDir, entry.name);
    const bytes = readFileSync(file);
    let end = bytes.length;
    while (end > 0 && bytes[end - 1] === 0) end -= 1;
    if (end === bytes.length) continue;
    writeFileSync(file, bytes.subarray(0, end));
    lengths[path.posix.join('pg_wal', entry.name)] = bytes.length;
  }
  const stamp: Stamp = { pglite: pgliteVersion(), lengths };
  writeFileSync(path.join(templateDir, STAMP), `${JSON.stringify(stamp)}\n`);
}
