const digit = (s: string, i: number) => s.charCodeAt(i) - 48;
const twoDigits = (s: string, i: number) => digit(s, i) * 10 + digit(s, i + 1);

/**
 * Epoch milliseconds of a `timestamptz` as PostgreSQL prints it with `DateStyle=ISO`
 * ("2026-11-24 02:45:12.924561+00", offsets like "-03" or "+05:30"), or undefined for anything else
 * (years before 100 or past 9999, BC, infinity, second-precision offsets), which the caller hands to the general parser.
 * Every row of a page carries a few of these: the form PostgreSQL prints is read without the general parser's
 * regular expression.
 */
export function epochMsOfTimestamptz(text: string): number | undefined {
  const n = text.length;
  if (n < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58) return undefined;
  let i = 19;
  let fraction = 0;
  if (text.charCodeAt(i) === 46) {
    let scale = 100;
    for (i += 1; i < n; i += 1) {
      const c = text.charCodeAt(i);
      if (c < 48 || c > 57) break;
      fraction += (c - 48) * scale;
      scale /= 10;
    }
  }
  const sign = text.charCodeAt(i);
  if (sign !== 43 && sign !== 45) return undefined;
  let offsetMinutes = twoDigits(text, i + 1) * 60;
  if (n === i + 6 && text.charCodeAt(i + 3) === 58) offsetMinutes += twoDigits(text, i + 4);
  else if (n !== i + 3) return undefined;
  const year = digit(text, 0) * 1000 + digit(text, 1) * 100 + twoDigits(text, 2);
  // Date.UTC reads years 0–99 as 1900–1999.
  if (year < 100) return undefined;
  const utc = Date.UTC(year, twoDigits(text, 5) - 1, twoDigits(text, 8), twoDigits(text, 11), twoDigits(text, 14), twoDigits(text, 17));
  const ms = utc + Math.floor(fraction) - (sign === 43 ? offsetMinutes : -offsetMinutes) * 60_000;
  return Number.isFinite(ms) ? ms : undefined;
}
