import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GroupCommit } from '../../src/util/group-commit.js';

/** A writer that records each call's items and answers when released. */
function recordingWriter(fail?: (items: number[]) => Error | undefined) {
  const calls: number[][] = [];
  const pending: Array<() => void> = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const write = (items: number[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push(items);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      pending.push(() => {
        inFlight -= 1;
        const error = fail?.(items);
        if (error) reject(error);
        else resolve(items.map((item) => `out-${item}`));
      });
    });
  const releaseAll = async () => {
    while (pending.length > 0) {
      for (const release of pending.splice(0)) release();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return { write, calls, releaseAll, maxInFlight: () => maxInFlight };
}

test('items that arrive while groups are being written are written together, each getting its own output', async () => {
  const writer = recordingWriter();
  const group = new GroupCommit(writer.write, { maxGroup: 4, maxInFlight: 2, minBeside: 1, retryAlone: () => true });
  const outputs = Promise.all(Array.from({ length: 11 }, (_, i) => group.submit(i)));
  // The first two are written at once, alone; the other nine wait for a free call, in groups of at most four.
  assert.deepEqual(writer.calls, [[0], [1]]);
  await writer.releaseAll();
  assert.deepEqual(await outputs, Array.from({ length: 11 }, (_, i) => `out-${i}`));
  assert.deepEqual(writer.calls, [[0], [1], [2, 3, 4, 5], [6, 7, 8, 9], [10]]);
  assert.equal(writer.maxInFlight(), 2);
});

test('a call beside one in flight starts only for minBeside items: a burst is not split into single-item calls', async () => {
  const writer = recordingWriter();
  const group = new GroupCommit(writer.write, { maxGroup: 8, maxInFlight: 2, minBeside: 3, retryAlone: () => true });
  const outputs = [0, 1, 2].map((i) => group.submit(i));
  // Alone, an item is written at once; the next two wait, being fewer than three beside a call in flight.
  assert.deepEqual(writer.calls, [[0]]);
  outputs.push(group.submit(3), group.submit(4));
  // The third waiting item starts a call beside the first; the fifth waits for a free call.
  assert.deepEqual(writer.calls, [[0], [1, 2, 3]]);
  await writer.releaseAll();
  assert.deepEqual(await Promise.all(outputs), ['out-0', 'out-1', 'out-2', 'out-3', 'out-4']);
  // When one call finishes, the single waiting item still waits for the other: it goes once none is in flight.
  assert.deepEqual(writer.calls, [[0], [1, 2, 3], [4]]);
  assert.equal(writer.maxInFlight(), 2);
});

test("a failed group is written again one item at a time, so one item's error is not another's", async () => {
  const writer = recordingWriter((items) => (items.includes(3) ? new Error('item 3 is bad') : undefined));
  const group = new GroupCommit(writer.write, { maxGroup: 8, maxInFlight: 1, minBeside: 1, retryAlone: () => true });
  const results = Promise.allSettled([0, 1, 2, 3, 4].map((i) => group.submit(i)));
  await writer.releaseAll();
  const settled = await results;
  assert.deepEqual(
    settled.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
    ['out-0', 'out-1', 'out-2', 'item 3 is bad', 'out-4'],
  );
  assert.deepEqual(writer.calls, [[0], [1, 2, 3, 4], [1], [2], [3], [4]]);
});

test('an error that would recur for every item (the database is unreachable) fails the whole group at once', async () => {
  const writer = recordingWriter(() => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
  const group = new GroupCommit(writer.write, { maxGroup: 8, maxInFlight: 1, minBeside: 1, retryAlone: (error) => (error as { code?: string }).code !== 'ECONNREFUSED' });
  const results = Promise.allSettled([0, 1, 2].map((i) => group.submit(i)));
  await writer.releaseAll();
  assert.deepEqual((await results).map((r) => r.status), ['rejected', 'rejected', 'rejected']);
  assert.deepEqual(writer.calls, [[0], [1, 2]]);
});

test('a writer that answers for fewer items than it was given fails the group instead of answering undefined', async () => {
  const group = new GroupCommit(async (items: number[]) => items.slice(1).map(String), { maxGroup: 8, maxInFlight: 1, minBeside: 1, retryAlone: () => false });
  await assert.rejects(group.submit(1), /written with 0 outputs/);
});
