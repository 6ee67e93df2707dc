import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Pool } from 'undici';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { anyText, invalid, valid, type Json, type JsonSchema } from '../helpers/fuzz/arbitraries.js';
import { seedTenant, tenantFingerprint, type FuzzTenant } from '../helpers/fuzz/world.js';

// Property-based test over the operation catalogue as served (GET /m2m/v1/openapi.json), so it follows
// whatever routes the server declares. For every operation it generates valid and hostile path parameters
// (own ids, another tenant's ids, escapes, NUL, broken Unicode, extremes), queries (valid values, hostile
// values, unknown parameters, tampered cursors), headers and bodies (schema-valid, wrong types, unknown
// properties, deep nesting, non-JSON), and checks: never a 5xx; X-Request-Id always; the error envelope on
// every 4xx; a refused write leaves every row of the caller's tenant as it was; a request naming another
// tenant's id is never a success and never changes that tenant's rows. Requests go over real sockets, 4
// persistent connections, as a keep-alive client sends them: every request must be answered (a body left unread
// on a connection would stall the next request on it).
// `npm test` runs a fixed seed and FUZZ_RUNS (default 8) cases per operation; `npm run fuzz` a random seed.

const RUNS = Number(process.env.FUZZ_RUNS ?? 8);
const SEED = process.env.FUZZ_SEED === 'random' ? Date.now() % 2 ** 31 : Number(process.env.FUZZ_SEED ?? 17);
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

interface Parameter {
  in: 'path' | 'query' | 'header';
  name: string;
  required?: boolean;
  schema: JsonSchema;
}
interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body?: JsonSchema;
}
interface OpenApi {
  paths: Record<string, Record<string, { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema: JsonSchema }> } }>>;
  components?: { schemas?: Record<string, JsonSchema> };
}

interface GeneratedRequest {
  url: string;
  headers: Record<string, string>;
  payload?: string;
  /** The path names another tenant's id. */
  foreign: boolean;
}

/** How long a request may go unanswered before it counts as unanswered (the server's own request timeout is 30 s). */
const UNANSWERED_AFTER_MS = 15_000;

/** An answer as the fuzzer reads it. */
interface Answer {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}

let app: TestApp;
let pool: Pool;
let own: FuzzTenant;
let other: FuzzTenant;
let operations: Operation[];
let components: Record<string, JsonSchema>;

before(async () => {
  app = await startTestApp();
  own = await seedTenant(app, 'Hotel Sol');
  other = await seedTenant(app, 'Hotel Luna');
  const res = await app.runtime.app.inject({ method: 'GET', url: '/m2m/v1/openapi.json' });
  assert.equal(res.statusCode, 200);
  const doc = res.json() as OpenApi;
  components = doc.components?.schemas ?? {};
  operations = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      parameters: op.parameters ?? [],
      body: op.requestBody?.content?.['application/json']?.schema,
    })),
  );
  await app.runtime.app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.runtime.app.server.address();
  assert.ok(address && typeof address === 'object');
  pool = new Pool(`http://127.0.0.1:${address.port}`, { connections: 4, pipelining: 1, headersTimeout: UNANSWERED_AFTER_MS, bodyTimeout: UNANSWERED_AFTER_MS });
  console.log(`fuzz: seed ${SEED}, ${RUNS} runs per operation, ${operations.length} operations`);
});
after(async () => {
  await pool?.close();
  await app.close();
});

/** Sends a request over the pool; undefined when it was not answered in time. */
async function send(method: string, request: GeneratedRequest): Promise<Answer | undefined> {
  // A header no HTTP client can send (a control character): checked in-process instead.
  if (Object.values(request.headers).some((value) => /[^\t\x20-\x7e\x80-\xff]/.test(value))) {
    const res = await app.runtime.app.inject({ method: method as 'GET', url: request.url, headers: request.headers, payload: request.payload });
    return { statusCode: res.statusCode, headers: res.headers, body: res.body };
  }
  try {
    const res = await pool.request({ method: method as 'GET', path: request.url, headers: request.headers, body: request.payload });
    return { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() };
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') return undefined;
    throw error;
  }
}

/** Percent-encodes text; unpaired surrogates (which encodeURIComponent refuses) go as UTF-8 of U+FFFD. */
function encode(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return [...Buffer.from(text, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  }
}

const rawSegments = fc.constantFrom('%', '%zz', '%ff', '%c0%ae', '%00', '%2e%2e', '..', '%2F', 'a'.repeat(3000));

function pathValue(parameter: Parameter): fc.Arbitrary<{ text: string; foreign: boolean }> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...own.ids).map((id) => ({ text: encode(id), foreign: false })) },
    { weight: 2, arbitrary: fc.constantFrom(...other.ids).map((id) => ({ text: encode(id), foreign: true })) },
    { weight: 1, arbitrary: valid(parameter.schema, components).map((v) => ({ text: encode(String(v)), foreign: false })) },
    { weight: 1, arbitrary: anyText.filter((t) => t.length > 0).map((t) => ({ text: encode(t), foreign: false })) },
    { weight: 1, arbitrary: rawSegments.map((t) => ({ text: t, foreign: false })) },
  );
}

function queryValue(parameter: Parameter): fc.Arbitrary<string | undefined> {
  const options: Array<fc.Arbitrary<string | undefined>> = [
    fc.constant(undefined),
    valid(parameter.schema, components).map((v) => encode(String(v))),
    valid(parameter.schema, components).map((v) => encode(String(v))),
    anyText.map(encode),
    fc.constantFrom(...own.ids, ...other.ids).map(encode),
  ];
  if (parameter.name === 'cursor') {
    options.push(fc.constantFrom(own.cursor, other.cursor, `${own.cursor.slice(0, -2)}xx`, own.cursor.replace('.', '.A'), 'e30.AAAA').map(encode));
  }
  return fc.oneof(...options);
}

const headerText = fc.oneof(
  fc.string({ minLength: 1, maxLength: 40 }).filter((s) => /^[\x20-\x7e]+$/.test(s)),
  fc.constantFrom('k\u0000', 'x'.repeat(300), 'é'),
);

function bodyOf(operation: Operation): fc.Arbitrary<{ payload?: string; contentType?: string }> {
  const json = (value: Json) => ({ payload: JSON.stringify(value), contentType: 'application/json' });
  const big = { payload: JSON.stringify({ filler: 'x'.repeat(1_500_000) }), contentType: 'application/json' };
  const odd = fc.constantFrom(
    big,
    { payload: '{"a":', contentType: 'application/json' },
    { payload: '', contentType: 'application/json' },
    { payload: 'hello', contentType: 'text/plain' },
    { payload: '{"__proto__":{"x":1}}', contentType: 'application/json' },
    { payload: '<a/>', contentType: 'application/xml' },
  );
  if (!operation.body) return fc.oneof(fc.constant({}), fc.constant({}), anyText.map((t) => json({ [t || 'x']: t })), odd);
  const schema = operation.body;
  return fc.oneof(
    { weight: 3, arbitrary: valid(schema, components).map(json) },
    { weight: 3, arbitrary: invalid(schema, components).map(json) },
    { weight: 1, arbitrary: odd },
  );
}

function requestOf(operation: Operation): fc.Arbitrary<GeneratedRequest> {
  const pathParams = operation.parameters.filter((p) => p.in === 'path');
  const queryParams = operation.parameters.filter((p) => p.in === 'query');
  const headerParams = operation.parameters.filter((p) => p.in === 'header');
  return fc
    .record({
      path: fc.tuple(...pathParams.map(pathValue)),
      query: fc.tuple(...queryParams.map(queryValue)),
      unknownQuery: fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.tuple(anyText, anyText) }),
      headers: fc.tuple(...headerParams.map(() => fc.option(headerText, { freq: 4 }))),
      body: bodyOf(operation),
    })
    .map(({ path, query, unknownQuery, headers, body }) => {
      let url = operation.path;
      pathParams.forEach((p, i) => (url = url.replace(`{${p.name}}`, path[i].text)));
      const pairs = queryParams.flatMap((p, i) => (query[i] === undefined ? [] : [`${encode(p.name)}=${query[i]}`]));
      if (unknownQuery) pairs.push(`${encode(unknownQuery[0] || 'foo')}=${encode(unknownQuery[1])}`);
      const requestHeaders: Record<string, string> = { authorization: `Bearer ${own.key}` };
      headerParams.forEach((p, i) => {
        const value = headers[i];
        if (value !== null) requestHeaders[p.name] = value;
      });
      if (body.contentType) requestHeaders['content-type'] = body.contentType;
      return {
        url: `/m2m/v1${url}${pairs.length > 0 ? `?${pairs.join('&')}` : ''}`,
        headers: requestHeaders,
        payload: body.payload,
        foreign: path.some((p) => p.foreign),
      };
    });
}

function describeRequest(operation: Operation, request: GeneratedRequest, res?: Answer): string {
  const payload = request.payload && request.payload.length > 300 ? `${request.payload.slice(0, 300)}…` : request.payload;
  return `${operation.method} ${request.url.slice(0, 300)} ${JSON.stringify(request.headers)} ${payload ?? ''}${res ? ` → ${res.statusCode} ${res.body.slice(0, 300)}` : ''}`;
}

function assertEnvelope(res: Answer, what: string): void {
  assert.match(String(res.headers['x-request-id']), REQUEST_ID, `no X-Request-Id: ${what}`);
  if (res.statusCode < 400) return;
  const body = JSON.parse(res.body) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
  assert.ok(body.error, `no envelope: ${what}`);
  assert.match(String(body.error.code), /^M2M_[A-Z_]+$/, what);
  assert.equal(typeof body.error.message, 'string', what);
  assert.ok(typeof body.error.details === 'object' && body.error.details !== null && !Array.isArray(body.error.details), what);
}

test('every operation of the served OpenAPI document: never a 5xx, always the envelope and X-Request-Id, a refusal writes nothing', async () => {
  let requests = 0;
  let unanswered = 0;
  const statuses = new Map<number, number>();
  for (const operation of operations) {
    const mutates = operation.method !== 'GET';
    await fc.assert(
      fc.asyncProperty(requestOf(operation), async (request) => {
        const ownBefore = mutates ? await tenantFingerprint(app, own.tenantId) : undefined;
        const otherBefore = mutates && request.foreign ? await tenantFingerprint(app, other.tenantId) : undefined;
        const res = await send(operation.method, request);
        requests += 1;
        if (!res) {
          unanswered += 1;
          assert.fail(`no answer within ${UNANSWERED_AFTER_MS} ms: ${describeRequest(operation, request)}`);
        }
        assert.notEqual(res.statusCode, 408, `a request sent whole timed out at the server: ${describeRequest(operation, request, res)}`);
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        const what = describeRequest(operation, request, res);
        assert.ok(res.statusCode < 500, `5xx: ${what}`);
        assertEnvelope(res, what);
        if (request.foreign) assert.ok(res.statusCode >= 400, `another tenant's id succeeded: ${what}`);
        if (ownBefore && res.statusCode >= 400) assert.deepEqual(await tenantFingerprint(app, own.tenantId), ownBefore, `a refused request wrote: ${what}`);
        if (otherBefore) assert.deepEqual(await tenantFingerprint(app, other.tenantId), otherBefore, `another tenant's rows changed: ${what}`);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  }
  console.log(`fuzz: ${requests} requests, ${unanswered} unanswered; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
  assert.equal(unanswered, 0);
  assert.ok(requests >= operations.length * RUNS);
});
