import { setTimeout as sleep } from 'node:timers/promises';
import type { EventEnvelope } from '../generated.js';
import { ApiConnectionError, ApiError, type M2MClient } from '../index.js';
import { apiKey, publicClient } from './client.js';
import type { Command } from './command.js';
import { UsageError } from './errors.js';
import { forwardEvent, type ForwardResult } from './forward.js';
import { ListenState, type FeedPosition } from './listen-state.js';

const PAGE_SIZE = 200;

interface ListenOptions {
  client: M2MClient;
  state: ListenState;
  forwardTo: string;
  types?: string[];
  intervalMs: number;
  replay: boolean;
  json: boolean;
  signal: AbortSignal;
  /** Called once the starting position is saved: events from then on will be forwarded. */
  onReady(): void;
}

/** First start of a feed: by default only what happens from now on is forwarded, so the backlog is walked, not sent. */
async function currentEnd(client: M2MClient, types: string | undefined, signal: AbortSignal): Promise<string> {
  let cursor: string | undefined;
  for (;;) {
    const page = await client.events.list({ types, cursor, limit: PAGE_SIZE }, { signal });
    cursor = page.nextCursor;
    if (!page.hasMore) return cursor;
  }
}

/** The longest wait between two attempts at an event the receiver did not answer. */
const MAX_RETRY_DELAY_MS = 10_000;

function report(json: boolean, event: { eventId: string; type: string }, result: ForwardResult, retryInMs?: number): void {
  if (json) {
    const line =
      result.status === null
        ? { eventId: event.eventId, type: event.type, status: null, error: result.error, ...(retryInMs === undefined ? {} : { retryInMs }) }
        : { eventId: event.eventId, type: event.type, status: result.status };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    return;
  }
  const retry = retryInMs === undefined ? '' : `; is the receiver running? retrying in ${(retryInMs / 1000).toFixed(1)} s`;
  const answer = result.status === null ? `failed: ${result.error}` : `[${result.status}]`;
  process.stdout.write(`${new Date().toISOString()}  ${event.type.padEnd(30)} ${event.eventId}  → ${answer} (${result.durationMs} ms)${retry}\n`);
}

/**
 * Forwards one event until the receiver answers (any status: the answer is printed, as a delivery's would be)
 * or the listener stops. An event nobody answered (nothing listening yet, a timeout) is tried again after the
 * poll interval, doubling up to 10 s, before any later event: a receiver started after the event still gets it,
 * and in order. Returns false when stopped first, so the event is not recorded as sent and a restart sends it.
 */
async function forwardUntilAnswered(options: ListenOptions, event: EventEnvelope): Promise<boolean> {
  let delayMs = Math.max(options.intervalMs, 100);
  for (;;) {
    const result = await forwardEvent(options.forwardTo, event, options.state.secret);
    if (result.status !== null) {
      report(options.json, event, result);
      return true;
    }
    report(options.json, event, result, delayMs);
    await sleep(delayMs, undefined, { signal: options.signal }).catch(() => undefined);
    if (options.signal.aborted) return false;
    delayMs = Math.min(delayMs * 2, MAX_RETRY_DELAY_MS);
  }
}

/**
 * Follows the feed page by page and forwards each event once. The position saved after every event is the page's
 * start plus the ids already sent from it, so a restart (even mid-page) resends nothing and skips nothing.
 */
async function follow(options: ListenOptions): Promise<void> {
  const { client, state, signal } = options;
  const types = options.types?.join(',');
  let position: FeedPosition = state.position ?? { cursor: options.replay ? undefined : await currentEnd(client, types, signal), sent: [] };
  await state.record(position);
  options.onReady();
  let unreachable = false;
  while (!signal.aborted) {
    let page;
    try {
      page = await client.events.list({ types, cursor: position.cursor, limit: PAGE_SIZE }, { signal });
      if (unreachable) process.stderr.write('API reachable again\n');
      unreachable = false;
    } catch (error) {
      if (signal.aborted) return;
      if (!(error instanceof ApiConnectionError) && !(error instanceof ApiError && (error.status === 429 || error.status >= 500))) throw error;
      if (!unreachable) process.stderr.write(`cannot read events (${error.message}); retrying\n`);
      unreachable = true;
      await sleep(Math.max(options.intervalMs, 1000), undefined, { signal }).catch(() => undefined);
      continue;
    }
    const sent = new Set(position.sent);
    for (const event of page.events) {
      if (signal.aborted) return;
      if (sent.has(event.eventId)) continue;
      if (!(await forwardUntilAnswered(options, event))) return;
      sent.add(event.eventId);
      position = { cursor: position.cursor, sent: [...sent] };
      await state.record(position);
    }
    if (page.nextCursor !== position.cursor) {
      position = { cursor: page.nextCursor, sent: [] };
      await state.record(position);
    }
    if (!page.hasMore) await sleep(options.intervalMs, undefined, { signal }).catch(() => undefined);
  }
}

function checkedUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`--forward-to is not a URL: ${value}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--forward-to must be an http(s) URL');
  return url.toString();
}

export const listenCommand: Command = {
  words: ['listen'],
  usage: '--forward-to <url> [--events a,b] [--json]',
  summary:
    'Follow GET /events and POST each new event to a local URL exactly as a webhook delivery (same body and headers, signed with ' +
    'the whsec_ secret printed at start and kept in .m2m/listen.json). An event the receiver does not answer is tried again ' +
    'until it does, so a receiver started later still gets it. Resumes where it stopped after a restart.',
  options: {
    'forward-to': { type: 'string', description: 'the local receiver, e.g. http://127.0.0.1:3000/webhooks (required)' },
    events: { type: 'string', description: 'only these event types (comma-separated; default: every type the key can read)' },
    interval: { type: 'string', description: 'milliseconds between polls once caught up (default 1000)' },
    replay: { type: 'boolean', description: 'on a first start, also forward the events already in the feed (last 30 days)' },
  },
  async run({ values, json, config }) {
    const forwardTo = checkedUrl(values.required('forward-to'));
    const client = publicClient(config);
    // Sorted: the saved cursor is bound to the filter, which must not depend on the order it was typed in.
    const types = values.list('events')?.sort();
    const state = await ListenState.open({ baseUrl: config.baseUrl, apiKey: apiKey(config), types });
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    const onReady = () =>
      process.stderr.write(
        `Ready! Forwarding ${types ? types.join(', ') : 'every event'} from ${config.baseUrl} to ${forwardTo}\n` +
          `Your webhook signing secret is ${state.secret} (stable across restarts)\n`,
      );
    try {
      const intervalMs = values.integer('interval') ?? 1000;
      await follow({ client, state, forwardTo, types, intervalMs, replay: values.flag('replay'), json, signal: stop.signal, onReady });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  },
};
