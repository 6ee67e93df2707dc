// The last epoch value printed: a row's timestamps are often equal (created = updated = next attempt), and
// Date#toISOString was the largest single cost of printing a 50-row page.
let lastEpochMs = Number.NaN;
let lastEpochIso = '';

/** ISO 8601 string of a database timestamp (a Date, text, or epoch milliseconds), or undefined when absent. */
export function iso(value: Date | string | number | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') {
    if (value !== lastEpochMs) {
      lastEpochIso = new Date(value).toISOString();
      lastEpochMs = value;
    }
    return lastEpochIso;
  }
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/** ISO 8601 with microseconds of epoch microseconds (`epochMicros()` in SQL): exact keyset cursor positions. */
export function isoMicros(micros: number): string {
  const millis = Math.floor(micros / 1000);
  return `${new Date(millis).toISOString().slice(0, 23)}${String(micros - millis * 1000).padStart(3, '0')}Z`;
}
