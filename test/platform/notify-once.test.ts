import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDb, type Db } from '../../src/db/driver.js';
import { eventually } from '../helpers/app.js';
import { isolatedDatabase } from '../helpers/db.js';

// A commit wakes this process's listeners once: at commit, in process. The same notification coming back through
// LISTEN is skipped, while another node's notifications still arrive (PostgreSQL: PGlite has one process).
test('a commit wakes local listeners once; another node wakes them too', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, async () => {
  const isolated = await isolatedDatabase();
  const open = (): Promise<Db> => openDb({ databaseUrl: isolated.env.DATABASE_URL, schema: isolated.env.DATABASE_SCHEMA, dataDir: '' });
  const node = await open();
  const other = await open();
  try {
    const woken: string[] = [];
    await node.listen('probe', () => woken.push('probe'));
    await node.transaction(async (tx) => tx.notify('probe'));
    assert.deepEqual(woken, ['probe'], 'woken at commit, in process');
    // Notifications reach the listener in commit order: once the other node's has arrived, our own echo would have too.
    await other.transaction(async (tx) => tx.notify('probe'));
    await eventually(async () => woken.length >= 2, 10_000, "the other node's notification");
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(woken, ['probe', 'probe'], 'our own notification was not delivered a second time');
  } finally {
    await other.close();
    await node.close();
    await isolated.drop();
  }
});
