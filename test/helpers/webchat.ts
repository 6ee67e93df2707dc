import type { LightMyRequestResponse } from 'fastify';
import type { TestApp } from './app.js';

// Shared by the webchat tests: a tenant with a webchat channel, visitor API calls through inject, and a reader of a
// visitor's Server-Sent Events stream over real HTTP.

export const SITE = 'https://hotel.example';

export async function webchatWorld(app: TestApp, allowedOrigins: string[] = [SITE], scopes = ['conversations:read', 'conversations:write', 'messages:read']) {
  const tenant = await app.tenantWithKey(scopes);
  const channel = await app.admin<{ channelId: string; widgetId: string; provider: string }>('POST', `/tenants/${tenant.tenantId}/channels`, {
    kind: 'webchat',
    name: 'Website chat',
    provider: 'webchat',
    connection: { allowedOrigins },
  });
  return { ...tenant, channelId: channel.channelId, widgetId: channel.widgetId, channel };
}

export interface VisitorCall {
  token?: string;
  origin?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
}

export function visitorCall(app: TestApp, method: string, url: string, call: VisitorCall = {}): Promise<LightMyRequestResponse> {
  const origin = call.origin === undefined ? SITE : call.origin;
  return app.runtime.app.inject({
    method: method as 'GET',
    url: `/webchat/v1${url}`,
    headers: { ...(origin ? { origin } : {}), ...(call.token ? { authorization: `Bearer ${call.token}` } : {}), ...call.headers },
    ...(call.body !== undefined ? { payload: call.body as Record<string, unknown> } : {}),
  });
}

export async function newVisitor(app: TestApp, widgetId: string, origin = SITE): Promise<{ sessionToken: string; visitorId: string }> {
  const res = await visitorCall(app, 'POST', '/sessions', { origin, body: { widgetId } });
  if (res.statusCode !== 201) throw new Error(`session → ${res.statusCode} ${res.body}`);
  return res.json();
}

export async function say(app: TestApp, token: string, text: string, origin = SITE): Promise<string> {
  const res = await visitorCall(app, 'POST', '/messages', { token, origin, body: { text } });
  if (res.statusCode !== 201) throw new Error(`message → ${res.statusCode} ${res.body}`);
  return (res.json() as { messageId: string }).messageId;
}

export interface SseEvent {
  id?: string;
  event: string;
  data: Record<string, unknown>;
}

/** An open SSE stream: `next` waits (without a timer) for the next event matching `match`. */
export class SseReader {
  readonly events: SseEvent[] = [];
  private readonly controller = new AbortController();
  private waiters: Array<() => void> = [];
  private cursor = 0;
  status = 0;
  headers = new Headers();
  private done: Promise<void> = Promise.resolve();

  static async open(url: string, headers: Record<string, string>): Promise<SseReader> {
    const reader = new SseReader();
    const res = await fetch(url, { headers, signal: reader.controller.signal });
    reader.status = res.status;
    reader.headers = res.headers;
    if (res.status === 200 && res.body) reader.done = reader.pump(res.body);
    else await res.text();
    return reader;
  }

  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event: Partial<SseEvent> & { lines: string[] } = { lines: [] };
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) event.id = line.slice(4);
            else if (line.startsWith('event: ')) event.event = line.slice(7);
            else if (line.startsWith('data: ')) event.lines.push(line.slice(6));
          }
          if (event.event) {
            this.events.push({ id: event.id, event: event.event, data: JSON.parse(event.lines.join('\n')) as Record<string, unknown> });
            const waiters = this.waiters;
            this.waiters = [];
            for (const wake of waiters) wake();
          }
        }
      }
    } catch {
      // aborted
    }
  }

  /** The next unread event matching `match` (events before it are passed over). */
  async next(match: (event: SseEvent) => boolean = () => true): Promise<SseEvent> {
    for (;;) {
      while (this.cursor < this.events.length) {
        const event = this.events[this.cursor++];
        if (match(event)) return event;
      }
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  async close(): Promise<void> {
    this.controller.abort();
    await this.done;
  }
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const byte of bytes) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A real PNG of `width`×`height`: a vertical gradient from `top` to `bottom` (RGB). */
export async function gradientPng(width: number, height: number, top: [number, number, number], bottom: [number, number, number]): Promise<Buffer> {
  const { deflateSync } = await import('node:zlib');
  const rows: Buffer[] = [];
  for (let y = 0; y < height; y++) {
    const t = y / Math.max(1, height - 1);
    const rgb = top.map((v, i) => Math.round(v + (bottom[i] - v) * t));
    const row = Buffer.alloc(1 + width * 3);
    for (let x = 0; x < width; x++) row.set(rgb, 1 + x * 3);
    rows.push(row);
  }
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', header), chunk('IDAT', deflateSync(Buffer.concat(rows))), chunk('IEND', Buffer.alloc(0))]);
}
