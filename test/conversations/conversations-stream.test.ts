import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { ADMIN_TOKEN, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { inbound, inboxTenant } from '../helpers/inbox.js';

interface SseEvent {
  id?: string;
  event?: string;
  data: Record<string, unknown>;
}

/** Reads a server-sent event stream incrementally, collecting the events as they arrive. */
async function openStream(url: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...headers }, signal: controller.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const pump = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event: SseEvent = { data: {} };
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) event.id = line.slice(4);
            else if (line.startsWith('event: ')) event.event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) {
            event.data = JSON.parse(data.join('\n')) as Record<string, unknown>;
            events.push(event);
          }
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    res,
    events,
    comments,
    /** Waits until `count` events have arrived. */
    async waitFor(count: number, what = `${count} events`) {
      return eventually(async () => events.length >= count && events, 10_000, what);
    },
    async close() {
      controller.abort();
      await pump;
    },
  };
}

describe('admin conversation activity stream (SSE)', () => {
  let app: TestApp;
  let base: string;
  before(async () => {
    app = await startTestApp();
    await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.runtime.app.server.address() as AddressInfo;
    base = `http://127.0.0.1:${port}/admin/v1`;
  });
  after(async () => {
    // fetch may leave a spare idle socket behind after an abort; don't wait for its keep-alive timeout.
    app.runtime.app.server.closeAllConnections();
    await app.close();
  });

  test('pushes read, needs-reply and review activity as it commits; Last-Event-ID resumes after that event', async () => {
    const { tenantId, key, apiKeyId, channelId } = await inboxTenant(app, ['conversations:triage:write', 'conversations:reviews:write']);
    const { conversationId } = await inbound(app, tenantId, channelId, { name: 'Pat', phone: '+14155550142' }, 'Hi');
    const other = await inboxTenant(app, ['conversations:triage:write']);
    const theirs = await inbound(app, other.tenantId, other.channelId, { phone: '+14155550143' });

    const stream = await openStream(`${base}/tenants/${tenantId}/conversations/stream`);
    let resumed: Awaited<ReturnType<typeof openStream>> | undefined;
    try {
      assert.equal(stream.res.status, 200);
      assert.match(String(stream.res.headers.get('content-type')), /^text\/event-stream/);
      assert.equal(stream.res.headers.get('cache-control'), 'no-cache');

      assert.equal((await app.api(key, 'POST', `/conversations/${conversationId}/read`)).statusCode, 200);
      // Another tenant's activity never shows on this tenant's stream.
      assert.equal((await app.api(other.key, 'POST', `/conversations/${theirs.conversationId}/read`)).statusCode, 200);
      assert.equal((await app.api(key, 'POST', `/conversations/${conversationId}/needs-reply/resolve`)).statusCode, 200);
      const review = await app.api(key, 'POST', `/conversations/${conversationId}/review`, { reasonCode: 'guest_experience' });
      assert.equal(review.statusCode, 200);

      const events = await stream.waitFor(3, 'read, needs-reply and review events');
      assert.deepEqual(events.map((e) => e.event), ['conversation.read', 'conversation.needs_reply_resolved', 'review.opened']);
      for (const event of events) {
        assert.equal(event.data.conversationId, conversationId);
        assert.equal(event.data.kind, event.event);
        assert.deepEqual(event.data.actor, { type: 'api_key', id: apiKeyId });
        assert.match(String(event.id), /^\d+$/);
        assert.ok(!Number.isNaN(Date.parse(String(event.data.occurredAt))));
      }
      const ids = events.map((e) => Number(e.id));
      assert.deepEqual([...ids].sort((a, b) => a - b), ids, 'ids increase');
      assert.equal((events[2].data.data as { reviewCaseId: string }).reviewCaseId, review.json().reviewCaseId);
      assert.ok(stream.comments.includes('connected'));

      // Nothing before the stream was opened (the inbound message) is replayed without Last-Event-ID.
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(stream.events.length, 3);

      resumed = await openStream(`${base}/tenants/${tenantId}/conversations/stream`, { 'last-event-id': String(events[0].id) });
      const again = await resumed.waitFor(2, 'the events after Last-Event-ID');
      assert.deepEqual(again.map((e) => e.id), [events[1].id, events[2].id]);
      assert.deepEqual(again.map((e) => e.event), ['conversation.needs_reply_resolved', 'review.opened']);

      // Both streams keep receiving new activity.
      assert.equal((await app.api(key, 'POST', `/conversations/${conversationId}/review/resolve`)).statusCode, 200);
      await stream.waitFor(4, 'review.resolved on the first stream');
      await resumed.waitFor(3, 'review.resolved on the resumed stream');
      assert.equal(stream.events[3].event, 'review.resolved');
      assert.equal(resumed.events[2].event, 'review.resolved');
      assert.equal(stream.events.length, 4, 'the other tenant never appeared');
    } finally {
      await stream.close();
      await resumed?.close();
    }
  });

  test('needs the admin token; an unknown tenant is 404', async () => {
    const { tenantId } = await inboxTenant(app, ['conversations:read']);
    const none = await fetch(`${base}/tenants/${tenantId}/conversations/stream`);
    assert.equal(none.status, 401);
    await none.body?.cancel();
    const missing = await fetch(`${base}/tenants/ten_missing/conversations/stream`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error.code, 'M2M_NOT_FOUND');
  });
});
