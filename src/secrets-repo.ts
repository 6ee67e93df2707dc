import type { Queryable } from './db/driver.js';

/** Process-wide secrets (not a tenant's): the generated master key. */
export const appSecretRepo = {
  /** The value stored under `name`, storing `candidate` first when there is none (every node agrees on the first). */
  async getOrCreate(db: Queryable, name: string, candidate: string): Promise<string> {
    await db.query('INSERT INTO app_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, candidate]);
    const rows = await db.query<{ value: string }>('SELECT value FROM app_secrets WHERE name = $1', [name]);
    return rows[0].value;
  },
};
