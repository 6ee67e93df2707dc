import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId, newOperatorId, pooledRandomBytes } from '../src/ids.js';

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
