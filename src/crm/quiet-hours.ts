/** `HH:mm` on a 24-hour clock. */
export const HH_MM = /^([01]\d|2[0-3]):[0-5]\d$/;

function minutes(hhmm: string): number {
  const [h, m] = hhmm.split(':').map(Number);
  return h * 60 + m;
}

/** The wall-clock minutes of the day at `at` in an IANA time zone (DST handled by Intl). */
export function localMinutes(at: Date, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(at);
  const hour = Number(parts.find((p) => p.type === 'hour')?.value);
  const minute = Number(parts.find((p) => p.type === 'minute')?.value);
  return hour * 60 + minute;
}

/**
 * True when `at` falls inside quiet hours [start, end) in the business time zone. A window whose end is
 * earlier than its start runs across midnight (22:00–07:00).
 */
export function inQuietHours(at: Date, timeZone: string, quiet: { start: string; end: string } | null): boolean {
  if (!quiet) return false;
  const now = localMinutes(at, timeZone);
  const start = minutes(quiet.start);
  const end = minutes(quiet.end);
  return start < end ? now >= start && now < end : now >= start || now < end;
}
