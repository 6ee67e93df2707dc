import type { Queryable, Tx } from '../db/driver.js';
import { newId } from '../ids.js';
import { enqueue } from '../jobs/queue.js';

export const CALLBACK_TASK = 'channels.process-callback';

export interface CallbackRow {
  id: string;
  provider: string;
  object: string;
  body: string;
  received_at: Date;
  processed_at: Date | null;
}

export const callbackRepo = {
  /** Stores a verified callback and queues its processing, in the caller's transaction: stored exactly when queued. */
  async store(tx: Tx, callback: { provider: string; object: string; body: string }, now: Date): Promise<string> {
    const id = newId('cb');
    await tx.query('INSERT INTO provider_callbacks (id, provider, object, body, received_at) VALUES ($1, $2, $3, $4, $5)', [id, callback.provider, callback.object, callback.body, now]);
    await enqueue(tx, now, { task: CALLBACK_TASK, payload: { callbackId: id } });
    return id;
  },

  async get(db: Queryable, id: string): Promise<CallbackRow | undefined> {
    return (await db.query<CallbackRow>('SELECT * FROM provider_callbacks WHERE id = $1', [id]))[0];
  },

  async markProcessed(db: Queryable, id: string, now: Date): Promise<void> {
    await db.query('UPDATE provider_callbacks SET processed_at = $2 WHERE id = $1', [id, now]);
  },
};
