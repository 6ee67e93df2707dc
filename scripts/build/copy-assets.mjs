// Copies what the compiled server reads at run time besides JavaScript (the SQL migrations) next to it in dist/.
import { cpSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const from = `${root}src/db/migrations`;
const to = `${root}dist/src/db/migrations`;
cpSync(from, to, { recursive: true, filter: (source) => !source.endsWith('.ts') });
console.log(`copied ${readdirSync(to).length} migrations to dist/src/db/migrations`);
