import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HostSlots } from '../../src/webhooks/host-slots.js';

// The dispatcher's per-destination bookkeeping on its own, with a hand-driven clock.

function slots(cap: number) {
  let now = 0;
  let releases = 0;
  const hostSlots = new HostSlots(cap, () => releases++, () => now);
  return {
    slots: hostSlots,
    advance: (ms: number) => (now += ms),
    releases: () => releases,
    room: () => {
      const { hosts, room } = hostSlots.claimRoom();
      return Object.fromEntries(hosts.map((host, i) => [host, room[i]]));
    },
  };
}

/** Resolves to the values of the promises that have settled by the time pending callbacks have run. */
async function settled<T>(promises: Array<Promise<T>>): Promise<Array<T | 'pending'>> {
  const marks = promises.map((p) => p.then((value): T | 'pending' => value));
  await new Promise((resolve) => setImmediate(resolve));
  return Promise.all(marks.map((p) => Promise.race([p, Promise.resolve('pending' as const)])));
}

test('never more requests in flight than the cap; waiting attempts get the slots in claim order', async () => {
  const { slots: s, releases } = slots(2);
  for (let i = 0; i < 5; i++) s.hold('a.example');
  const grants = Array.from({ length: 5 }, () => s.acquire('a.example'));
  assert.deepEqual(await settled(grants), [true, true, 'pending', 'pending', 'pending']);

  s.release('a.example', true);
  assert.deepEqual(await settled(grants), [true, true, true, 'pending', 'pending']);
  s.release('a.example', true);
  s.release('a.example', true);
  assert.deepEqual(await settled(grants), [true, true, true, true, true]);
  assert.equal(releases(), 3, 'every release wakes the claim loop');
});

test('an attempt that never requested (canceled) frees its hold but no request slot', async () => {
  const { slots: s, room } = slots(2);
  for (let i = 0; i < 3; i++) s.hold('a.example');
  const first = s.acquire('a.example');
  const second = s.acquire('a.example');
  assert.deepEqual(await settled([first, second]), [true, true]);
  s.release('a.example', false);
  const third = s.acquire('a.example');
  assert.deepEqual(await settled([third]), ['pending'], 'the two requests in flight still fill the cap');
  assert.deepEqual(room(), { 'a.example': 0 });
});

test('a host that finishes nothing gets no attempts ahead of its free request slots', () => {
  const { slots: s, room, advance } = slots(3);
  for (let i = 0; i < 3; i++) s.hold('slow.example');
  for (let i = 0; i < 3; i++) void s.acquire('slow.example');
  advance(10_000);
  assert.deepEqual(room(), { 'slow.example': 0 });
});

test('a host gets ahead what it finished lately (at most the cap), and that fades when it stops', () => {
  const { slots: s, room, advance } = slots(4);
  for (let i = 0; i < 10; i++) s.hold('fast.example');
  for (let i = 0; i < 10; i++) void s.acquire('fast.example');
  assert.deepEqual(room(), { 'fast.example': 0 }, '4 requesting and 6 waiting: full');

  s.release('fast.example', true);
  s.release('fast.example', true);
  // 8 held (4 requesting, 4 waiting), 2 finished just now: room for 4 + 2 - 8 = none yet.
  assert.deepEqual(room(), { 'fast.example': 0 });
  for (let i = 0; i < 6; i++) s.release('fast.example', true);
  // 2 held, 8 finished just now (counted as at most the cap): room for 4 + 4 - 2.
  assert.deepEqual(room(), { 'fast.example': 6 });

  advance(1_000);
  assert.deepEqual(room(), { 'fast.example': 2 }, 'the pace has faded: only the free request slots');
  s.release('fast.example', true);
  s.release('fast.example', true);
  advance(1_000);
  assert.deepEqual(room(), {}, 'an idle host is forgotten');
});

test('after close, waiting attempts and new requests get no slot', async () => {
  const { slots: s } = slots(1);
  for (let i = 0; i < 3; i++) s.hold('a.example');
  const grants = [s.acquire('a.example'), s.acquire('a.example')];
  s.close();
  assert.deepEqual(await settled(grants), [true, false]);
  assert.equal(await s.acquire('a.example'), false);
});
