// Builds dist/pglite-template: an empty, migrated embedded database (migrations and function files) that a server with an empty DATA_DIR
// starts from (see src/db/pglite-template.ts). Runs after tsc, from the compiled code.
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const { openDb } = await import(`${root}dist/src/db/driver.js`);
const { migrateAll } = await import(`${root}dist/src/db/migrate.js`);
const { compactTemplateWal, stampTemplate } = await import(`${root}dist/src/db/pglite-template.js`);

const dir = `${root}dist/pglite-template`;
rmSync(dir, { recursive: true, force: true });
const started = Date.now();
// No template of its own to start from: templateDir points where none is.
const db = await openDb({ dataDir: dir, templateDir: `${dir}/none` });
const applied = await migrateAll(db);
await compactTemplateWal(db);
await db.close();
stampTemplate(dir);
console.log(`embedded database template with ${applied.migrations.length} migrations and ${applied.functions.length} function files in dist/pglite-template (${Date.now() - started} ms)`);
