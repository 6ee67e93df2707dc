import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDb } from '../../src/db/driver.js';

// PGlite runs statements on this thread. Queued statements take turns with the event loop (src/db/pglite.ts),
// so timers and sockets are served while a long queue drains, and statements still run in the order queued.

const QUEUED = 200;
const BUSY_STATEMENT = 'SELECT count(*)::int AS n FROM generate_series(1, 20000)';

test('a long queue of statements lets the event loop in before it drains, and keeps its order', { timeout: 120_000 }, async () => {
  const db = await openDb({ dataDir: 'memory://turns' });
  try {
    await db.query(BUSY_STATEMENT); // the first statement of a database pays for its warm-up
    const finished: number[] = [];
    let finishedWhenTimerRan: number | undefined;
    let finishedWhenImmediateRan: number | undefined;
    const queue = Array.from({ length: QUEUED }, (_, i) =>
      db.transaction(async (tx) => {
        const rows = await tx.query<{ n: number }>(BUSY_STATEMENT);
        assert.equal(rows[0].n, 20000);
      }).then(() => void finished.push(i)),
    );
    setTimeout(() => (finishedWhenTimerRan = finished.length), 0);
    setImmediate(() => (finishedWhenImmediateRan = finished.length));
    await Promise.all(queue);

    assert.deepEqual(finished, [...Array(QUEUED).keys()], 'statements finish in the order they were queued');
    assert.ok(finishedWhenImmediateRan !== undefined && finishedWhenImmediateRan < QUEUED / 2, `setImmediate ran after ${finishedWhenImmediateRan} of ${QUEUED}`);
    assert.ok(finishedWhenTimerRan !== undefined && finishedWhenTimerRan < QUEUED / 2, `a timer ran after ${finishedWhenTimerRan} of ${QUEUED}`);
  } finally {
    await db.close();
  }
});

test('a failed statement does not stop the queue behind it', { timeout: 60_000 }, async () => {
  const db = await openDb({ dataDir: 'memory://turns-failure' });
  try {
    const results = await Promise.allSettled([
      db.query('SELECT 1 AS n'),
      db.query('SELECT * FROM no_such_table'),
      db.transaction(async (tx) => tx.query('SELECT 1/0')),
      db.query<{ n: number }>('SELECT 2 AS n'),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    assert.deepEqual((results[3] as PromiseFulfilledResult<Array<{ n: number }>>).value, [{ n: 2 }]);
  } finally {
    await db.close();
  }
});
