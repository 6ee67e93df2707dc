import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkLoop, type Claimed } from '../../src/jobs/work-loop.js';
import { eventually } from '../helpers/app.js';

// The claim loop's batch window: once a claim has taken everything due, wake-ups within the window are
// served by one later claim; a claim that could not take everything is followed at once when woken.

function loop(result: () => Claimed) {
  let claims = 0;
  const workLoop = new WorkLoop({
    pollIntervalMs: 60_000,
    maxInFlight: 10,
    batchWindowMs: 60_000,
    claim: async () => {
      claims += 1;
      return result();
    },
    onError: (error) => assert.fail(String(error)),
  });
  return { workLoop, claims: () => claims };
}

test('caught up: wake-ups within the batch window wait for it, and stop does not', async () => {
  const { workLoop, claims } = loop(() => ({ units: [], more: false }));
  workLoop.start();
  await eventually(async () => claims() === 1, 5_000, 'the first claim');
  for (let i = 0; i < 20; i++) workLoop.wake();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(claims(), 1, 'no claim before the window ends');
  assert.equal(await workLoop.stop(1_000), 0);
});

test('behind: a wake-up is followed by a claim at once', async () => {
  const { workLoop, claims } = loop(() => ({ units: [], more: true }));
  workLoop.start();
  await eventually(async () => claims() === 1, 5_000, 'the first claim');
  workLoop.wake();
  await eventually(async () => claims() === 2, 5_000, 'a second claim');
  await workLoop.stop(1_000);
});

test('finished work wakes the loop', async () => {
  let gate: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (gate = resolve));
  let first = true;
  const { workLoop, claims } = loop(() => {
    if (!first) return { units: [], more: true };
    first = false;
    return { units: [() => finished], more: true };
  });
  workLoop.start();
  await eventually(async () => claims() === 1 && workLoop.running === 1, 5_000, 'one unit running');
  gate();
  await eventually(async () => claims() === 2 && workLoop.running === 0, 5_000, 'a claim after the unit finished');
  await workLoop.stop(1_000);
});

for (const behind of [false, true]) {
  test(`when-behind: a finished unit claims again ${behind ? 'after a capped claim' : 'never when the claim took everything due'}`, async () => {
    let gate: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => (gate = resolve));
    let claims = 0;
    const workLoop = new WorkLoop({
      pollIntervalMs: 60_000,
      maxInFlight: 10,
      wakeOnFinish: 'when-behind',
      claim: async () => {
        claims += 1;
        return claims === 1 ? { units: [() => finished, () => finished], more: behind } : { units: [], more: false };
      },
      onError: (error) => assert.fail(String(error)),
    });
    workLoop.start();
    await eventually(async () => claims === 1 && workLoop.running === 2, 5_000, 'two units running');
    gate();
    await eventually(async () => workLoop.running === 0, 5_000, 'the units finished');
    if (behind) {
      await eventually(async () => claims === 2, 5_000, 'a claim after the units finished');
    } else {
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(claims, 1, 'caught up: no claim after the units finished');
      workLoop.wake();
      await eventually(async () => claims === 2, 5_000, 'a wake-up still claims');
    }
    assert.equal(await workLoop.stop(1_000), 0);
  });
}
