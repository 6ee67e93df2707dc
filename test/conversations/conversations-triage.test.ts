import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { UNKNOWN_OPERATOR, addOperator, inbound, inboxTenant, monotonicClock } from '../helpers/inbox.js';

const ALL = ['conversations:read', 'conversations:triage:write', 'conversations:reviews:write'];

const REVIEW_FIELDS_OPEN = ['conversationId', 'ok', 'reasonCode', 'requestedAt', 'requestedByOperatorId', 'requestedByOperatorName', 'reviewCaseId', 'status'];

describe('conversation triage and reviews', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ clock: monotonicClock() });
  });
  after(() => app.close());

  /** A tenant, its key, and one conversation with two unread inbound messages. */
  async function conversation(scopes = ALL) {
    const tenant = await inboxTenant(app, scopes);
    await inbound(app, tenant.tenantId, tenant.channelId, { name: 'Carla', phone: '+34 612 000 111' }, 'first');
    const last = await inbound(app, tenant.tenantId, tenant.channelId, { phone: '+34612000111' }, 'Can I bring my dog?');
    const item = async () => {
      const res = await app.api(tenant.key, 'GET', '/conversations');
      assert.equal(res.statusCode, 200, res.body);
      return res.json().conversations.find((c: { conversationId: string }) => c.conversationId === last.conversationId) as Record<string, unknown>;
    };
    return { ...tenant, ...last, item };
  }

  const isTime = (value: unknown) => typeof value === 'string' && new Date(value).toISOString() === value;

  describe('POST /conversations/{id}/read', () => {
    test('zeroes the unread count once; the second call says nothing changed', async () => {
      const c = await conversation();
      const first = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/read`);
      assert.equal(first.statusCode, 200);
      const body = first.json();
      assert.deepEqual(Object.keys(body).sort(), ['changed', 'conversationId', 'ok', 'readAt', 'readByOperatorId', 'readByOperatorName', 'unreadCountAfter', 'unreadCountBefore']);
      assert.equal(body.ok, true);
      assert.equal(body.conversationId, c.conversationId);
      assert.equal(body.unreadCountBefore, 2);
      assert.equal(body.unreadCountAfter, 0);
      assert.equal(body.changed, true);
      assert.equal(body.readByOperatorId, c.apiKeyId, 'the integration credential is the actor');
      assert.equal(body.readByOperatorName, 'test');
      assert.ok(isTime(body.readAt));

      const item = await c.item();
      assert.equal(item.unreadCount, 0);
      assert.equal(item.needsReply, true, 'reading does not acknowledge the obligation');

      const second = (await app.api(c.key, 'POST', `/conversations/${c.conversationId}/read`)).json();
      assert.equal(second.changed, false);
      assert.equal(second.unreadCountBefore, 0);
      assert.equal(second.unreadCountAfter, 0);

      await inbound(app, c.tenantId, c.channelId, { phone: '+34612000111' }, 'hello again');
      assert.equal((await c.item()).unreadCount, 1, 'a new message is unread again');
    });

    test('a 201-character id is 400; unknown or foreign conversations are 404; needs conversations:triage:write', async () => {
      const c = await conversation();
      const long = await app.api(c.key, 'POST', `/conversations/${'c'.repeat(201)}/read`);
      assert.equal(long.statusCode, 400);
      assert.equal(long.json().error.code, 'M2M_INVALID_REQUEST');
      const maxLength = await app.api(c.key, 'POST', `/conversations/${'c'.repeat(200)}/read`);
      assert.equal(maxLength.statusCode, 404, '200 characters is valid and simply not found');
      assert.equal(maxLength.json().error.code, 'M2M_NOT_FOUND');

      const other = await conversation();
      const foreign = await app.api(c.key, 'POST', `/conversations/${other.conversationId}/read`);
      assert.equal(foreign.statusCode, 404);
      assert.equal(foreign.json().error.code, 'M2M_NOT_FOUND');
      assert.equal((await other.item()).unreadCount, 2, 'the foreign conversation is untouched');

      const reader = await conversation(['conversations:read', 'conversations:reviews:write']);
      const denied = await app.api(reader.key, 'POST', `/conversations/${reader.conversationId}/read`);
      assert.equal(denied.statusCode, 403);
      assert.deepEqual(denied.json().error.details, { requiredScopes: ['conversations:triage:write'], missingScopes: ['conversations:triage:write'] });
    });
  });

  describe('POST /conversations/{id}/needs-reply/resolve', () => {
    test('acknowledges the obligation raised by the last inbound message, once', async () => {
      const c = await conversation();
      const res = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/needs-reply/resolve`);
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.equal(body.ok, true);
      assert.equal(body.conversationId, c.conversationId);
      assert.equal(body.needsReplyBefore, true);
      assert.equal(body.needsReplyAfter, false);
      assert.equal(body.unreadCountBefore, 2);
      assert.equal(body.unreadCountAfter, 2, 'acknowledging is not reading');
      assert.equal(body.changed, true);
      assert.equal(body.resolutionKind, 'obligation_acknowledged');
      assert.equal(body.resolvedInboundEventId, c.messageId);
      assert.equal(typeof body.needsReplyReasonBefore, 'string');
      assert.equal(body.needsReplyReasonAfter, undefined);
      assert.equal(body.needsReplyDetailAfter, undefined);
      assert.ok(isTime(body.resolvedAt));
      const allowed = new Set([
        'ok', 'conversationId', 'unreadCountBefore', 'unreadCountAfter', 'needsReplyBefore', 'needsReplyAfter', 'resolvedAt', 'changed',
        'needsReplyReasonBefore', 'needsReplyDetailBefore', 'needsReplyReasonAfter', 'needsReplyDetailAfter', 'resolvedInboundEventId', 'resolutionKind',
      ]);
      for (const field of Object.keys(body)) assert.ok(allowed.has(field), `unexpected field ${field}`);

      const item = await c.item();
      assert.equal(item.needsReply, false);
      assert.equal(item.unreadCount, 2);

      const second = (await app.api(c.key, 'POST', `/conversations/${c.conversationId}/needs-reply/resolve`)).json();
      assert.equal(second.changed, false);
      assert.equal(second.needsReplyBefore, false);
      assert.equal(second.needsReplyAfter, false);
      assert.equal(second.resolvedInboundEventId, undefined);
      assert.equal(second.resolutionKind, 'obligation_acknowledged');

      const next = await inbound(app, c.tenantId, c.channelId, { phone: '+34612000111' }, 'still there?');
      assert.equal((await c.item()).needsReply, true, 'a new inbound message raises it again');
      const third = (await app.api(c.key, 'POST', `/conversations/${c.conversationId}/needs-reply/resolve`)).json();
      assert.equal(third.resolvedInboundEventId, next.messageId);
    });

    test('does not close an open review or handoff', async () => {
      const c = await conversation();
      await app.admin('POST', `/tenants/${c.tenantId}/conversations/${c.conversationId}/handoff`, { action: 'open' });
      const withReview = await conversation();
      assert.equal((await app.api(withReview.key, 'POST', `/conversations/${withReview.conversationId}/review`)).statusCode, 200);

      for (const [conv, field] of [[c, 'openHandoff'], [withReview, 'openReview']] as const) {
        const res = await app.api(conv.key, 'POST', `/conversations/${conv.conversationId}/needs-reply/resolve`);
        assert.equal(res.json().changed, true);
        const item = await conv.item();
        assert.equal(item.needsReply, false);
        assert.equal(item[field], true, `${field} stays open`);
      }
      // The review is still open: a second one conflicts.
      assert.equal((await app.api(withReview.key, 'POST', `/conversations/${withReview.conversationId}/review`)).statusCode, 409);
    });

    test('404 for a foreign conversation; needs conversations:triage:write', async () => {
      const c = await conversation();
      const other = await conversation();
      assert.equal((await app.api(c.key, 'POST', `/conversations/${other.conversationId}/needs-reply/resolve`)).statusCode, 404);
      assert.equal((await other.item()).needsReply, true);
      assert.equal((await app.api(c.key, 'POST', `/conversations/${'x'.repeat(201)}/needs-reply/resolve`)).statusCode, 400);
      const reader = await conversation(['conversations:read']);
      const denied = await app.api(reader.key, 'POST', `/conversations/${reader.conversationId}/needs-reply/resolve`);
      assert.equal(denied.statusCode, 403);
      assert.deepEqual(denied.json().error.details.requiredScopes, ['conversations:triage:write']);
    });
  });

  describe('reviews', () => {
    test('POST with no body opens a requested review with reasonCode other, the key as requester', async () => {
      const c = await conversation();
      const res = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`);
      assert.equal(res.statusCode, 200, res.body);
      const review = res.json();
      assert.deepEqual(Object.keys(review).sort(), REVIEW_FIELDS_OPEN);
      assert.equal(review.ok, true);
      assert.equal(review.conversationId, c.conversationId);
      assert.match(review.reviewCaseId, /^rev_/);
      assert.equal(review.status, 'requested');
      assert.equal(review.reasonCode, 'other');
      assert.equal(review.requestedByOperatorId, c.apiKeyId);
      assert.equal(review.requestedByOperatorName, 'test');
      assert.ok(isTime(review.requestedAt));
      assert.equal((await c.item()).openReview, true);
    });

    test('reasonCode, note and assignee are echoed with the assignee name', async () => {
      const c = await conversation();
      const ana = await addOperator(app, c.tenantId, 'Ana Díaz');
      const res = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`, {
        reasonCode: 'knowledge_gap',
        note: 'The bot did not know about pets.',
        assignedOperatorId: ana.operatorId,
      });
      assert.equal(res.statusCode, 200, res.body);
      const review = res.json();
      assert.equal(review.status, 'requested');
      assert.equal(review.reasonCode, 'knowledge_gap');
      assert.equal(review.note, 'The bot did not know about pets.');
      assert.equal(review.assignedOperatorId, ana.operatorId);
      assert.equal(review.assignedOperatorName, 'Ana Díaz');
      assert.equal(review.resolvedAt, undefined);
    });

    test('every documented reasonCode is accepted; a note of 2000 characters is accepted', async () => {
      for (const reasonCode of ['ai_response_issue', 'knowledge_gap', 'policy_compliance', 'guest_experience', 'booking_payment', 'other']) {
        const c = await conversation();
        const res = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`, { reasonCode, note: 'n'.repeat(2000) });
        assert.equal(res.statusCode, 200, reasonCode);
        assert.equal(res.json().reasonCode, reasonCode);
        assert.equal(res.json().note.length, 2000);
      }
    });

    test('invalid input is 400, an unknown assignee 404, and nothing is opened', async () => {
      const c = await conversation();
      const post = (body: unknown) => app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`, body);
      for (const body of [{ reasonCode: 'rude_guest' }, { note: 'n'.repeat(2001) }, { reasonCode: 'other', colour: 'red' }, { note: 42 }]) {
        const res = await post(body);
        assert.equal(res.statusCode, 400, JSON.stringify(body).slice(0, 60));
        assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST');
      }
      const other = await inboxTenant(app, ['conversations:read']);
      const foreignOperator = await addOperator(app, other.tenantId, 'Foreigner');
      const inactive = await addOperator(app, c.tenantId, 'Retired');
      await app.admin('PATCH', `/tenants/${c.tenantId}/operators/${inactive.operatorId}`, { active: false });
      for (const assignedOperatorId of [UNKNOWN_OPERATOR, foreignOperator.operatorId, inactive.operatorId]) {
        const res = await post({ assignedOperatorId });
        assert.equal(res.statusCode, 404);
        assert.equal(res.json().error.code, 'M2M_NOT_FOUND');
      }
      assert.equal((await c.item()).openReview, false);
      assert.equal((await post({})).statusCode, 200, 'a valid request still opens one');
    });

    test('409 M2M_CONFLICT while a review or a handoff is open', async () => {
      const c = await conversation();
      assert.equal((await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`)).statusCode, 200);
      const again = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`, { reasonCode: 'guest_experience' });
      assert.equal(again.statusCode, 409);
      assert.equal(again.json().error.code, 'M2M_CONFLICT');

      const h = await conversation();
      await app.admin('POST', `/tenants/${h.tenantId}/conversations/${h.conversationId}/handoff`, { action: 'open' });
      const blocked = await app.api(h.key, 'POST', `/conversations/${h.conversationId}/review`);
      assert.equal(blocked.statusCode, 409);
      assert.equal(blocked.json().error.code, 'M2M_CONFLICT');
      assert.equal((await h.item()).openReview, false);
      // Once the handoff is resolved a review can be opened.
      await app.admin('POST', `/tenants/${h.tenantId}/conversations/${h.conversationId}/handoff`, { action: 'resolve' });
      assert.equal((await app.api(h.key, 'POST', `/conversations/${h.conversationId}/review`)).statusCode, 200);
    });

    test('PUT review/assignment sets and clears the assignee', async () => {
      const c = await conversation();
      const ana = await addOperator(app, c.tenantId, 'Ana Díaz');
      const bo = await addOperator(app, c.tenantId, 'Bo Chen');
      const url = `/conversations/${c.conversationId}/review/assignment`;

      const none = await app.api(c.key, 'PUT', url, { operatorId: ana.operatorId });
      assert.equal(none.statusCode, 409, 'no open review');
      assert.equal(none.json().error.code, 'M2M_CONFLICT');

      const opened = (await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`, { assignedOperatorId: ana.operatorId })).json();
      const assigned = await app.api(c.key, 'PUT', url, { operatorId: bo.operatorId });
      assert.equal(assigned.statusCode, 200, assigned.body);
      assert.equal(assigned.json().reviewCaseId, opened.reviewCaseId);
      assert.equal(assigned.json().status, 'requested');
      assert.equal(assigned.json().assignedOperatorId, bo.operatorId);
      assert.equal(assigned.json().assignedOperatorName, 'Bo Chen');

      const cleared = await app.api(c.key, 'PUT', url, { operatorId: null });
      assert.equal(cleared.statusCode, 200);
      assert.equal(cleared.json().assignedOperatorId, undefined);
      assert.equal(cleared.json().assignedOperatorName, undefined);

      const unknown = await app.api(c.key, 'PUT', url, { operatorId: UNKNOWN_OPERATOR });
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.json().error.code, 'M2M_NOT_FOUND');

      for (const body of [{}, undefined, { operatorId: '' }, { operatorId: 'o'.repeat(121) }, { operatorId: 42 }]) {
        const res = await app.api(c.key, 'PUT', url, body);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(res.json().error.code, 'M2M_INVALID_REQUEST');
      }
      const missing = await app.api(c.key, 'PUT', url, {});
      assert.deepEqual(missing.json().error.details.issues, [{ path: 'body.operatorId', message: 'is required' }]);
    });

    test('POST review/resolve closes the review only; a new one can then be opened', async () => {
      const c = await conversation();
      const opened = (await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`, { reasonCode: 'policy_compliance' })).json();
      const res = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review/resolve`, { resolutionNote: 'Policy explained.' });
      assert.equal(res.statusCode, 200, res.body);
      const resolved = res.json();
      assert.equal(resolved.reviewCaseId, opened.reviewCaseId);
      assert.equal(resolved.status, 'resolved');
      assert.equal(resolved.reasonCode, 'policy_compliance');
      assert.ok(isTime(resolved.resolvedAt));
      assert.ok(resolved.resolvedAt >= resolved.requestedAt);
      const item = await c.item();
      assert.equal(item.openReview, false);
      assert.equal(item.needsReply, true, 'resolving a review is not acknowledging needs-reply');
      assert.equal(item.unreadCount, 2);

      const twice = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review/resolve`);
      assert.equal(twice.statusCode, 409);
      assert.equal(twice.json().error.code, 'M2M_CONFLICT');

      const reopened = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`);
      assert.equal(reopened.statusCode, 200);
      assert.notEqual(reopened.json().reviewCaseId, opened.reviewCaseId);
      const noBody = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review/resolve`);
      assert.equal(noBody.statusCode, 200, 'resolutionNote is optional');
      assert.equal(noBody.json().status, 'resolved');
      assert.equal((await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`)).statusCode, 200);
      const bad = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review/resolve`, { resolutionNote: 'r'.repeat(2001) });
      assert.equal(bad.statusCode, 400);
    });

    test('resolving a review does not touch an open handoff, which then blocks a new review', async () => {
      const c = await conversation();
      await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`);
      // The admin side can open a handoff while a review is open.
      const handoff = await app.admin<{ status: string }>('POST', `/tenants/${c.tenantId}/conversations/${c.conversationId}/handoff`, { action: 'open' });
      assert.equal(handoff.status, 'open');
      const resolved = await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review/resolve`);
      assert.equal(resolved.statusCode, 200);
      const item = await c.item();
      assert.equal(item.openReview, false);
      assert.equal(item.openHandoff, true);
      assert.equal((await app.api(c.key, 'POST', `/conversations/${c.conversationId}/review`)).statusCode, 409);
    });

    test('404 for foreign conversations; every review route needs conversations:reviews:write', async () => {
      const c = await conversation();
      const other = await conversation();
      await app.api(other.key, 'POST', `/conversations/${other.conversationId}/review`);
      const triager = await conversation(['conversations:read', 'conversations:triage:write']);
      for (const [method, path, body] of [
        ['POST', 'review', undefined],
        ['PUT', 'review/assignment', { operatorId: null }],
        ['POST', 'review/resolve', undefined],
      ] as const) {
        const foreign = await app.api(c.key, method, `/conversations/${other.conversationId}/${path}`, body);
        assert.equal(foreign.statusCode, 404, path);
        assert.equal(foreign.json().error.code, 'M2M_NOT_FOUND');
        const denied = await app.api(triager.key, method, `/conversations/${triager.conversationId}/${path}`, body);
        assert.equal(denied.statusCode, 403, path);
        assert.deepEqual(denied.json().error.details, { requiredScopes: ['conversations:reviews:write'], missingScopes: ['conversations:reviews:write'] });
      }
      assert.equal((await other.item()).openReview, true, 'the foreign review is untouched');
    });
  });
});
