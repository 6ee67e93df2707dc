import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDb, type Db } from '../../src/db/driver.js';
import { migrate } from '../../src/db/migrate.js';

/**
 * Each test file gets its own database namespace: a fresh schema on the PostgreSQL server when
 * DATABASE_URL is set, otherwise an in-memory PGlite. Returns the env for the server and a cleanup.
 */
export async function isolatedDatabase(): Promise<{ env: Record<string, string>; drop: () => Promise<void> }> {
  const url = process.env.DATABASE_URL;
  if (!url) return { env: { DATA_DIR: 'memory://' }, drop: async () => undefined };
  const schema = `t_${randomBytes(6).toString('hex')}`;
  return {
    env: { DATABASE_URL: url, DATABASE_SCHEMA: schema },
    drop: async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    },
  };
}

/** An isolated database (see isolatedDatabase) opened and migrated, for tests of SQL rules without a server. */
export async function migratedDatabase(): Promise<{ db: Db; close: () => Promise<void> }> {
  const isolated = await isolatedDatabase();
  const db = await openDb({ databaseUrl: isolated.env.DATABASE_URL, schema: isolated.env.DATABASE_SCHEMA, dataDir: isolated.env.DATA_DIR ?? '' });
  await migrate(db);
  return {
    db,
    close: async () => {
      await db.close();
      await isolated.drop();
    },
  };
}
