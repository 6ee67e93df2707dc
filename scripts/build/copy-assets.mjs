// Copies what the compiled server reads at run time besides JavaScript next to it in dist/: the SQL migrations and
// every domain's function files (src/<domain>/sql/*.sql), which src/db/migrate.ts finds beside its own module.
import { cpSync, existsSync, readdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const copyDir = (relative) => {
  const from = `${root}src/${relative}`;
  const to = `${root}dist/src/${relative}`;
  // Replaced, not merged: a file renamed or removed since the last build must not stay behind.
  rmSync(to, { recursive: true, force: true });
  cpSync(from, to, { recursive: true, filter: (source) => !source.endsWith('.ts') });
  return readdirSync(to).length;
};

const migrations = copyDir('db/migrations');
let functions = 0;
for (const domain of readdirSync(`${root}src`, { withFileTypes: true })) {
  if (domain.isDirectory() && existsSync(`${root}src/${domain.name}/sql`)) functions += copyDir(`${domain.name}/sql`);
}
console.log(`copied ${migrations} migrations and ${functions} function files to dist/src`);
