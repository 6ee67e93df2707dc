import assert from 'node:assert/strict';
import { test } from 'node:test';
import { iso, isoMicros } from '../../src/util/time.js';

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

test('timestamptz text as PostgreSQL prints it parses to the same instant as the general parser', async () => {
  const pg = (await import('pg')).default;
  const { epochMsOfTimestamptz } = await import('../../src/db/timestamp.js');
  // The parser node-postgres ships (the driver replaces it for the common form only).
  const general = (text: string) => (pg.types.getTypeParser(1184, 'text') as (value: string) => Date)(text);
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  const texts = ['1969-12-31 23:59:59.9995+00', '0100-01-01 00:00:00.5+00', '2026-11-24 02:45:12+00', '2026-11-24 02:45:12.9+00', '2026-11-24 02:45:12.123456-03', '2026-11-24 02:45:12.5+05:30', '1999-12-31 23:59:59.999-09:30'];
  for (let i = 0; i < 5_000; i += 1) {
    const d = new Date(Math.floor(Math.random() * 4_000_000_000_000));
    const fraction = i % 3 === 0 ? '' : `.${String(Math.floor(Math.random() * 1_000_000)).padStart(6, '0').slice(0, 1 + (i % 6))}`;
    const offset = i % 4 === 0 ? '+00' : `${i % 2 ? '-' : '+'}${pad(i % 14)}${i % 5 === 0 ? ':30' : ''}`;
    texts.push(`${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}${fraction}${offset}`);
  }
  for (const text of texts) assert.equal(epochMsOfTimestamptz(text), general(text).getTime(), text);
  // Forms outside the fast path are left to the general parser.
  for (const text of ['infinity', '-infinity', '0044-03-15 12:00:00+00 BC', '12026-01-01 00:00:00+00', '1900-01-01 00:00:00+00:19:32', '0099-06-01 00:00:00+00']) {
    assert.equal(epochMsOfTimestamptz(text), undefined, text);
  }
});
