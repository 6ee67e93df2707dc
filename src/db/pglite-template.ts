import { cpSync, existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/**
 * A fresh embedded database spends seconds in PGlite's initdb (and the memory it leaves behind stays in the
 * process). `npm run build` therefore makes one migrated, empty database (no tenant, no secret: only the
 * schema) and ships it in dist/; a server whose data directory is empty starts from a copy of it, then applies
 * any migration newer than the copy as usual. A copy made by another PGlite version is never used.
 */
export const BUILT_TEMPLATE_DIR = fileURLToPath(new URL('../../pglite-template', import.meta.url));

const STAMP = 'm2m-template.json';

function pgliteVersion(): string {
  // The package does not export its package.json: it is found from the entry point's location.
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  const marker = `${path.sep}node_modules${path.sep}@electric-sql${path.sep}pglite${path.sep}`;
  const manifest = JSON.parse(readFileSync(`${entry.slice(0, entry.lastIndexOf(marker) + marker.length)}package.json`, 'utf8')) as { version?: unknown };
  return String(manifest.version);
}

/** Copies the template into `dataDir` when it is empty and the template was made by the installed PGlite. */
export function seedFromTemplate(dataDir: string, templateDir: string): boolean {
  if (existsSync(path.join(dataDir, 'PG_VERSION')) || readdirSync(dataDir).length > 0) return false;
  const stamp = path.join(templateDir, STAMP);
  if (!existsSync(stamp)) return false;
  const { pglite } = JSON.parse(readFileSync(stamp, 'utf8')) as { pglite?: unknown };
  if (pglite !== pgliteVersion()) return false;
  cpSync(path.join(templateDir, 'pgdata'), dataDir, { recursive: true });
  return true;
}

/** Marks `templateDir` (holding a closed, migrated `pgdata`) as made by the installed PGlite. */
export function stampTemplate(templateDir: string): void {
  writeFileSync(path.join(templateDir, STAMP), `${JSON.stringify({ pglite: pgliteVersion() })}\n`);
}
