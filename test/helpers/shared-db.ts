import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDb, type Db } from '../../src/db/driver.js';
import { migrate } from '../../src/db/migrate.js';
import { isolatedDatabase } from './db.js';

/**
 * A database that a child process can open too: a fresh PostgreSQL schema, or a PGlite data directory on
 * disk (PGlite allows one process at a time, so the parent closes it before a child opens it).
 */
export async function sharedDatabase(): Promise<{ env: Record<string, string>; open: () => Promise<Db>; drop: () => Promise<void> }> {
  if (process.env.DATABASE_URL) {
    const isolated = await isolatedDatabase();
    return {
      env: isolated.env,
      open: async () => {
        const db = await openDb({ databaseUrl: isolated.env.DATABASE_URL, schema: isolated.env.DATABASE_SCHEMA, dataDir: '' });
        await migrate(db);
        return db;
      },
      drop: isolated.drop,
    };
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'm2m-test-'));
  return {
    env: { DATA_DIR: dir },
    open: async () => {
      const db = await openDb({ dataDir: dir });
      await migrate(db);
      return db;
    },
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}
