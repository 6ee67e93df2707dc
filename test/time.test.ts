import assert from 'node:assert/strict';
import { test } from 'node:test';
import { iso, isoMicros } from '../src/util/time.js';

test('iso prints exactly what Date#toISOString prints, for epoch milliseconds, Dates and strings', () => {
  const samples = [0, 999, 1000, 59_999, 60_000, 1_763_922_410_718, 1_763_922_419_999, 1_763_922_420_000, 253_402_300_799_999];
  for (let i = 0; i < 20_000; i += 1) samples.push(Math.floor(Math.random() * 4_000_000_000_000));
  for (const ms of samples) {
    const expected = new Date(ms).toISOString();
    assert.equal(iso(ms), expected);
    assert.equal(iso(new Date(ms)), expected);
    assert.equal(iso(expected), expected);
  }
  // Outside four-digit years and before 1970 it falls back to Date's own format.
  assert.equal(iso(-1), '1969-12-31T23:59:59.999Z');
  assert.equal(iso(253_402_300_800_000), '+010000-01-01T00:00:00.000Z');
  assert.equal(iso(null), undefined);
  assert.equal(iso(undefined), undefined);
  assert.throws(() => iso('not a date'), RangeError);
});

test('isoMicros keeps the microseconds of a keyset position', () => {
  assert.equal(isoMicros(1_763_922_410_718_123), '2025-11-23T18:26:50.718123Z');
  assert.equal(isoMicros(1_763_922_410_000_007), '2025-11-23T18:26:50.000007Z');
});
