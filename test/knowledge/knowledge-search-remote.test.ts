import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { startReceiver } from '../helpers/receiver.js';

// With an OpenAI-compatible embeddings endpoint configured (here a fake one), text sources are embedded by it at
// ingestion and questions by it at search time, so the vector side compares vectors of one model; an endpoint
// that fails at search time leaves the keyword side to answer.

const TOPICS = ['parking', 'breakfast', 'dog'];
let app: TestApp;
let endpoint: Awaited<ReturnType<typeof startReceiver>>;
let tenant: { tenantId: string; key: string };
let failing = false;
const questions: string[] = [];

/** A fake semantic model: one dimension per topic, "car" and "garage" meaning parking, "pet" meaning dog. */
function embed(text: string): number[] {
  const lower = text.toLowerCase();
  const has = (...words: string[]) => (words.some((w) => lower.includes(w)) ? 1 : 0);
  return [has('parking', 'car', 'garage'), has('breakfast'), has('dog', 'pet'), 0.1];
}

before(async () => {
  endpoint = await startReceiver((_req, res, received) => {
    const { input } = JSON.parse(received.body) as { input: string[] };
    if (failing) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"down"}');
    if (input.length === 1) questions.push(input[0]);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: input.map((text, index) => ({ index, embedding: embed(text) })) }));
  });
  app = await startTestApp({ env: { EMBEDDINGS_URL: endpoint.url, EMBEDDINGS_MODEL: 'test-model' }, startWorkers: true });
  tenant = await app.tenantWithKey(['knowledge:read', 'knowledge:write']);
  for (const topic of TOPICS) {
    const text = { parking: 'The garage under the hotel has forty spaces at 18 euros a day.', breakfast: 'Breakfast is served on the terrace from 7:30.', dog: 'Dogs up to ten kilos stay for 15 euros a night.' }[topic];
    const res = await app.api(tenant.key, 'POST', '/knowledge/sources', { sourceType: 'text', title: topic, text });
    assert.equal(res.statusCode, 201, res.body);
  }
  await eventually(async () => {
    const rows = await app.runtime.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM knowledge_chunks WHERE tenant_id = $1 AND embedding_model = 'remote:test-model'`,
      [tenant.tenantId],
    );
    return rows[0].n === TOPICS.length;
  }, 20_000, 'text sources embedded by the endpoint');
});
after(async () => {
  await app.close();
  await endpoint.close();
});

test('questions are embedded by the configured endpoint; the vector side finds what no keyword matches', async () => {
  const res = await app.api(tenant.key, 'POST', '/knowledge/search', { query: 'where do I leave my car?' });
  assert.equal(res.statusCode, 200, res.body);
  const results = res.json().results as Array<{ title: string }>;
  assert.equal(results[0]?.title, 'parking', 'no word in common: the vectors of the model matched');
  assert.ok(questions.includes('where do I leave my car?'), 'the question went to the endpoint');
});

test('an endpoint down at search time: the keyword side answers', async () => {
  failing = true;
  try {
    const res = await app.api(tenant.key, 'POST', '/knowledge/search', { query: 'breakfast terrace' });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().results[0]?.title, 'breakfast');
  } finally {
    failing = false;
  }
});
