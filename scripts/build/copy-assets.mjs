// Copies what the compiled server reads at run time besides JavaScript (the SQL migrations) next to it in dist/.
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const from = `${root}src/db/migrations`;
const to = `${root}dist/src/db/migrations`;
// Replaced, not merged: a migration renamed or removed since the last build must not stay behind.
rmSync(to, { recursive: true, force: true });
cpSync(from, to, { recursive: true, filter: (source) => !source.endsWith('.ts') });
console.log(`copied ${readdirSync(to).length} migrations to dist/src/db/migrations`);
