// The database seen by the rest of the code: one small interface (interface.ts), two drivers behind it.
import type { Db } from './interface.js';

export type { Db, PoolUse, Queryable, Tx } from './interface.js';

export interface DbOptions {
  databaseUrl?: string;
  schema?: string;
  dataDir: string;
  poolSize?: number;
  /** PGlite: a migrated database copied into an empty data directory instead of running initdb (see pglite-template.ts). */
  templateDir?: string;
}

/** node-postgres (pooled) when a URL is given, embedded PGlite otherwise; each driver is loaded only when used. */
export async function openDb(options: DbOptions): Promise<Db> {
  const schema = options.schema ?? 'public';
  if (options.databaseUrl) {
    const { openPostgres } = await import('./postgres.js');
    return openPostgres(options.databaseUrl, schema, options.poolSize ?? 20);
  }
  const { openPglite } = await import('./pglite.js');
  return openPglite({ dataDir: options.dataDir, schema, templateDir: options.templateDir });
}
