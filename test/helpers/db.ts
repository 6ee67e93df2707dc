import { randomBytes } from 'node:crypto';
import pg from 'pg';

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
