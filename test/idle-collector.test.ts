import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { getHeapStatistics } from 'node:v8';
import { startIdleCollector } from '../src/util/idle-collector.js';
import { eventually } from './helpers/app.js';

const MB = 1024 * 1024;

test('an idle process collects after a burst of work, and gives dead buffers back', async () => {
  const pauses: number[] = [];
  const stop = startIdleCollector({ checkMs: 100, externalBytes: 16 * MB, onCollect: (ms) => pauses.push(ms) });
  try {
    // Settled: the test's own start may count as a burst; once idle, collections stop.
    let settled = -1;
    for (let round = 0; round < 10 && pauses.length !== settled; round += 1) {
      settled = pauses.length;
      await sleep(400);
    }
    assert.equal(pauses.length, settled, 'idle with nothing to give back: no more collections');

    // A burst: 40 MB of buffers (under the growth at which V8 collects by itself) used and dropped while the event loop is busy for a while.
    let buffers: Buffer[] | undefined = Array.from({ length: 40 }, (_, i) => Buffer.alloc(MB, i));
    assert.equal(buffers.length, 40);
    buffers = undefined;
    const until = performance.now() + 250;
    while (performance.now() < until) {
      // busy
    }

    await eventually(async () => pauses.length >= settled + 2, 5_000, 'two collections once idle');
    assert.ok(getHeapStatistics().external_memory < 16 * MB, `external memory ${Math.round(getHeapStatistics().external_memory / MB)} MB after`);
    await sleep(500);
    assert.equal(pauses.length, settled + 2, 'then nothing more while idle');
  } finally {
    stop();
  }
});
