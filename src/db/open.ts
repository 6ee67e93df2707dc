import type { Config } from '../config.js';
import { openDb, type Db } from './driver.js';
import { migrate } from './migrate.js';

export interface OpenedDatabase {
  db: Db;
  /** Versions of the migrations this start applied. */
  applied: number[];
}

/** Opens the configured database and applies pending migrations. */
export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'databaseSchema' | 'dataDir'>): Promise<OpenedDatabase> {
  const db = await openDb({ databaseUrl: config.databaseUrl, schema: config.databaseSchema, dataDir: config.dataDir });
  try {
    return { db, applied: await migrate(db) };
  } catch (error) {
    await db.close().catch(() => undefined);
    throw error;
  }
}
