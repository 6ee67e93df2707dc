import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ALL_SCOPES } from '../../src/auth/scopes.js';
import { statusOf } from '../../src/errors.js';
import { EVENT_TYPES } from '../../src/events/types.js';
import { buildAjv } from '../../src/http/validation.js';
import { OPERATIONS } from '../../src/operations/catalogue.js';
import type { Operation } from '../../src/operations/define.js';
import { signatureHeader } from '../../src/webhooks/sign.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// The reference document teaches, and what it shows is what the server answers: every error example of the
// statuses every operation shares is compared with a real answer of that operation.

interface ErrorValue {
  error: { code: string; message: string; details: Record<string, unknown> };
}
type Doc = {
  info: { description: string };
  paths: Record<string, Record<string, { description: string; responses: Record<string, { description: string; content?: { 'application/json'?: { examples?: Record<string, { value: ErrorValue }> } } }> }>>;
  webhooks: Record<string, { post: { requestBody: { content: { 'application/json': { schema: { properties: { data: unknown } }; example?: unknown } } } } }>;
};

let app: TestApp;
let doc: Doc;

before(async () => {
  app = await startTestApp({ env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true' } });
  doc = (await app.api(undefined, 'GET', '/openapi.json')).json();
});
after(() => app.close());

function entryOf(op: Operation) {
  return doc.paths[op.path][op.method.toLowerCase()];
}

function examplesOf(op: Operation, status: number): ErrorValue[] {
  return Object.values(entryOf(op).responses[String(status)]?.content?.['application/json']?.examples ?? {}).map((item) => item.value);
}

function fillPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, 'unknown-id');
}

test('the introduction covers authentication, scopes, errors, idempotency, pagination, rate limits, versioning and webhooks', () => {
  const intro = doc.info.description;
  for (const heading of ['Authentication', 'Scopes', 'Errors', 'Idempotency', 'Pagination', 'Rate limits', 'Versioning', 'Webhooks']) assert.match(intro, new RegExp(`^## ${heading}$`, 'm'), heading);
  for (const scope of ALL_SCOPES) assert.ok(intro.includes(`\`${scope}\``), scope);
  for (const [code, status] of Object.entries(statusOf)) assert.ok(intro.includes(`| ${status} | \`${code}\` |`), code);
  for (const type of EVENT_TYPES) assert.ok(intro.includes(`\`${type}\``), type);
  assert.match(intro, /m2m_live_/);
  assert.match(intro, /RateLimit-Remaining/);
  // The signature example is the scheme's own test vector, and the server signs it the same way.
  const vector = JSON.parse(readFileSync(new URL('../../../shared/spec/webhook-signature-vectors.json', import.meta.url), 'utf8')).cases.find((c: { body: string }) => c.body === '');
  assert.ok(intro.includes(vector.header));
  assert.equal(signatureHeader(vector.secret, vector.timestamp, vector.body), vector.header);
});

test('every operation shows its scopes and has real examples for each error status it documents', () => {
  for (const op of OPERATIONS) {
    const entry = entryOf(op);
    assert.ok(op.scopes.every((scope) => entry.description.includes(`\`${scope}\``)) && entry.description.includes('**Scopes:**'), `${op.operationId}: scopes in the description`);
    for (const [status, response] of Object.entries(entry.responses)) {
      if (Number(status) < 400) continue;
      const examples = examplesOf(op, Number(status));
      if (examples.length === 0) {
        assert.match(response.description, /reserved by the contract/, `${op.operationId} ${status}: an example or a plain word`);
        continue;
      }
      for (const value of examples) {
        assert.equal(statusOf[value.error.code as keyof typeof statusOf], Number(status), `${op.operationId} ${status}: ${value.error.code}`);
        assert.notEqual(value.error.code, 'string', 'no placeholder');
        assert.ok(value.error.message.length > 5);
      }
    }
    for (const known of op.knownErrors) {
      assert.ok(
        examplesOf(op, known.status).some((value) => value.error.code === known.code && value.error.message === known.message && value.error.details.reason === known.reason),
        `${op.operationId}: ${known.reason ?? known.message}`,
      );
    }
  }
  const start = OPERATIONS.find((op) => op.operationId === 'startConversation')!;
  const reasons = examplesOf(start, 409).map((value) => value.error.details.reason);
  for (const reason of ['recipient_no_consent', 'recipient_opted_out', 'unreconciled_failed_attempt']) assert.ok(reasons.includes(reason), reason);
  assert.ok(examplesOf(start, 409).some((value) => value.error.code === 'M2M_IDEMPOTENCY_CONFLICT'));
});

function sameAsOneOf(op: Operation, status: number, body: ErrorValue, what: string): void {
  const examples = examplesOf(op, status);
  assert.ok(
    examples.some((value) => JSON.stringify(value) === JSON.stringify(body)),
    `${op.operationId} ${what}: answered ${JSON.stringify(body)}, documented ${JSON.stringify(examples)}`,
  );
}

test('the shared error examples are what each operation answers: 401, 403, 400 and 404 for unknown ids', async () => {
  const { key: wrongKey } = await app.tenantWithKey(['crm:sales:read']);
  const { key: otherKey } = await app.tenantWithKey(['crm:automation:read']);
  const { key: allKey } = await app.tenantWithKey([...ALL_SCOPES]);
  let notFoundChecked = 0;
  for (const op of OPERATIONS) {
    const url = fillPath(op.path);
    const body = op.body ? op.examples.request : undefined;
    const headers: Record<string, string> = op.idempotency ? { 'idempotency-key': `ref-${op.operationId}` } : {};
    const unauthenticated = await app.api(undefined, op.method, url, body);
    sameAsOneOf(op, 401, unauthenticated.json(), 'without a key');

    const probe = op.scopes.some((scope) => scope === 'crm:sales:read') ? otherKey : wrongKey;
    const refused = await app.api(probe, op.method, url, body);
    assert.equal(refused.statusCode, 403);
    sameAsOneOf(op, 403, refused.json(), 'without its scopes');

    // Required query parameters get a value, so that the unknown one is the only issue.
    const required = (op.query.required ?? []).map((name: string) => `${name}=unknown-id&`).join('');
    const unknownQuery = await app.api(allKey, op.method, `${url}?${required}colour=red`, body, headers);
    assert.equal(unknownQuery.statusCode, 400, `${op.operationId}: ${unknownQuery.body}`);
    sameAsOneOf(op, 400, unknownQuery.json(), 'with an unknown query parameter');

    if (Object.keys(op.params.properties).length > 0) {
      const missing = await app.api(allKey, op.method, url, body, headers);
      assert.equal(missing.statusCode, 404, `${op.operationId}: ${missing.body}`);
      sameAsOneOf(op, 404, missing.json(), 'with unknown ids');
      notFoundChecked++;
    }
    if (op.idempotency?.key === 'required') {
      const keyless = await app.api(allKey, op.method, url, body);
      assert.equal(keyless.statusCode, 400);
      sameAsOneOf(op, 400, keyless.json(), 'without Idempotency-Key');
    }
  }
  assert.ok(notFoundChecked >= 25, `${notFoundChecked} operations with ids`);
});

test('a refusal of an operation’s own rules is documented as answered: startConversation without consent', async () => {
  const { tenantId, key } = await app.tenantWithKey(['conversations:write']);
  const whatsapp = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp' });
  await app.admin('PUT', `/tenants/${tenantId}/channels/${whatsapp.channelId}/templates/conversation_start`, { category: 'UTILITY', locales: [{ locale: 'en_US', status: 'approved', ready: true }] });
  const start = OPERATIONS.find((op) => op.operationId === 'startConversation')!;
  const res = await app.api(key, 'POST', '/conversations/start', { channelId: whatsapp.channelId, recipientPhone: '+525520000099', locale: 'en_US', messageText: 'Hello' }, { 'idempotency-key': 'no-consent' });
  assert.equal(res.statusCode, 409);
  assert.equal(res.json().error.details.reason, 'recipient_no_consent');
  sameAsOneOf(start, 409, res.json(), 'to a recipient without consent');
});

test('the webhooks section has every event type, with the schemas GET /webhooks/event-types answers and valid examples', async () => {
  const { key } = await app.tenantWithKey(['webhooks:read']);
  const catalogue: Array<{ type: string; schema: unknown }> = (await app.api(key, 'GET', '/webhooks/event-types')).json().eventTypes;
  assert.deepEqual(Object.keys(doc.webhooks), catalogue.map((entry) => entry.type));
  const ajv = buildAjv({ coerceTypes: false, strict: false });
  for (const entry of catalogue) {
    const media = doc.webhooks[entry.type].post.requestBody.content['application/json'];
    assert.deepEqual(media.schema.properties.data, entry.schema, entry.type);
    assert.ok(media.example, `${entry.type}: an example`);
    const validate = ajv.compile(media.schema);
    assert.ok(validate(media.example), `${entry.type}: ${JSON.stringify(validate.errors)}`);
  }
});
