import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId, newOperatorId, pooledRandomBytes } from '../../src/ids.js';

test('pooled random bytes: the requested length, never the same bytes twice across refills, each call its own copy', () => {
  const seen = new Set<string>();
  // 3,000 × 9 bytes crosses the 4 KB pool several times; a repeated 72-bit value would mean a reused slice.
  for (let i = 0; i < 3_000; i += 1) {
    const bytes = pooledRandomBytes(9);
    assert.equal(bytes.length, 9);
    const hex = bytes.toString('hex');
    assert.ok(!seen.has(hex), 'a slice of the pool was handed out twice');
    seen.add(hex);
    bytes.fill(0);
  }
  assert.equal(pooledRandomBytes(5_000).length, 5_000);
  // Overwriting what a caller got (above) does not leak into what the next caller gets.
  assert.notDeepEqual(pooledRandomBytes(32), Buffer.alloc(32));
});

test('ids: prefix, alphabet and length', () => {
  const ids = new Set(Array.from({ length: 1_000 }, () => newId('evt')));
  assert.equal(ids.size, 1_000);
  for (const id of ids) assert.match(id, /^evt_[0-9a-z]{20}$/);
  assert.match(newOperatorId(), /^[0-9a-f]{24}$/);
});

test('ids: every character equally likely (a byte taken modulo 36 favoured 0–3 by 14%)', () => {
  const counts = new Map<string, number>();
  for (let i = 0; i < 10_000; i += 1) for (const ch of newId('x').slice(2)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  assert.equal(counts.size, 36);
  const mean = 200_000 / 36;
  // Each count's standard deviation is about 1.3% of the mean: 7% is five of them, and half the old bias.
  for (const [ch, count] of counts) assert.ok(Math.abs(count / mean - 1) < 0.07, `"${ch}" drawn ${count} times, expected about ${Math.round(mean)}`);
});
