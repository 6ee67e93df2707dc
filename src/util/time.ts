// Date#toISOString's string, made without it because every row of a list prints several dates: the
// "YYYY-MM-DDT" prefix of a few recent days is kept (a page alternates between a row's activity and creation
// days) and the time of day is printed from two-digit strings.
const MAX_FOUR_DIGIT_YEAR_MS = 253_402_300_799_999;
const DAY_MS = 86_400_000;
const DAY_PREFIXES_KEPT = 64;
const dayPrefixes = new Map<number, string>();
const TWO_DIGITS = Array.from({ length: 60 }, (_, n) => (n < 10 ? `0${n}` : String(n)));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));

function dayPrefix(day: number): string {
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size >= DAY_PREFIXES_KEPT) dayPrefixes.clear();
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  return prefix;
}

function isoOfEpochMs(ms: number): string {
  if (!(ms >= 0 && ms <= MAX_FOUR_DIGIT_YEAR_MS && Number.isInteger(ms))) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  let rest = ms - day * DAY_MS;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  return `${dayPrefix(day)}${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[seconds]}.${THREE_DIGITS[rest - seconds * 1000]}Z`;
}

/** ISO 8601 string of a database timestamp (a Date, text, or epoch milliseconds), or undefined when absent. */
export function iso(value: Date | string | number | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') return isoOfEpochMs(value);
  return isoOfEpochMs((value instanceof Date ? value : new Date(value)).getTime());
}

/** ISO 8601 with microseconds of epoch microseconds (`epochMicros()` in SQL): exact keyset cursor positions. */
export function isoMicros(micros: number): string {
  const millis = Math.floor(micros / 1000);
  return `${new Date(millis).toISOString().slice(0, 23)}${String(micros - millis * 1000).padStart(3, '0')}Z`;
}
