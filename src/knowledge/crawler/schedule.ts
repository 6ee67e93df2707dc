import { createHash } from 'node:crypto';

const HOUR_MS = 3_600_000;
/** The most a website's recrawl time is moved by its spread offset. */
const MAX_SPREAD_MS = HOUR_MS;
/** The longest a failing website's schedule backs off to. */
const MAX_BACKOFF_MS = 720 * HOUR_MS;

/**
 * A website's fixed offset in [0, min(10% of its interval, 1 hour)): websites created or crawled at the
 * same moment become due spread over that window instead of all at once. Derived from the website id, so
 * a website keeps its place in the schedule.
 */
export function spreadOffsetMs(websiteId: string, intervalHours: number): number {
  const fraction = createHash('sha256').update(websiteId).digest().readUInt32BE(0) / 2 ** 32;
  return Math.floor(fraction * Math.min(intervalHours * HOUR_MS * 0.1, MAX_SPREAD_MS));
}

/**
 * When the workers next crawl a website: `intervalHours` after `from` (its last crawl), plus its spread
 * offset. After `failures` failed crawls in a row the interval doubles each time (at most 30 days).
 */
export function nextCrawlAt(from: Date, websiteId: string, intervalHours: number, failures = 0): Date {
  const interval = Math.min(intervalHours * HOUR_MS * 2 ** Math.min(failures, 20), Math.max(MAX_BACKOFF_MS, intervalHours * HOUR_MS));
  return new Date(from.getTime() + interval + spreadOffsetMs(websiteId, intervalHours));
}
