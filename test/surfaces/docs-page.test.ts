import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { EVENT_TYPES } from '../../src/events/types.js';
import { OPERATIONS } from '../../src/operations/catalogue.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// The reference page in a real browser (Debian's chromium, installed by .ci/run): it renders every operation
// of openapi.json and makes no request off the server.

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
let app: TestApp;
let origin: string;
let browser: Browser;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  app = await startTestApp();
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  origin = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});
after(async () => {
  await browser?.close();
  await app?.close();
});

test('GET /m2m/v1/docs renders every operation from openapi.json, with nothing fetched off the server', async () => {
  const page = await browser.newPage();
  const requested: string[] = [];
  page.on('request', (request) => requested.push(request.url()));
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  const response = await page.goto(`${origin}/m2m/v1/docs`);
  assert.equal(response?.status(), 200);
  await page.waitForSelector('.opblock', { timeout: 60_000 });
  const operationIds = await page.$$eval('.opblock .opblock-summary-operation-id', (nodes) => nodes.map((node) => node.textContent?.trim() ?? ''));
  for (const op of OPERATIONS) assert.ok(operationIds.includes(op.operationId), `${op.operationId} rendered`);
  assert.equal(await page.title(), 'M2M API reference');
  const offServer = requested.filter((url) => !url.startsWith(origin) && !url.startsWith('data:'));
  assert.deepEqual(offServer, [], 'no request leaves the server');
  assert.ok(requested.some((url) => url === `${origin}/m2m/v1/openapi.json`));
  assert.deepEqual(errors, []);
  await page.close();
});

test('the page teaches: the introduction renders, an operation shows its scopes and real error examples, webhooks are listed', async () => {
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${origin}/m2m/v1/docs`);
  await page.waitForSelector('.opblock', { timeout: 60_000 });
  const headings = await page.$$eval('.info h2', (nodes) => nodes.map((node) => node.textContent?.trim() ?? ''));
  for (const heading of ['Authentication', 'Scopes', 'Errors', 'Idempotency', 'Pagination', 'Rate limits', 'Versioning', 'Webhooks']) assert.ok(headings.includes(heading), `introduction: ${heading}`);
  const introduction = (await page.textContent('.info')) ?? '';
  assert.match(introduction, /M2M_AUTH_INSUFFICIENT_SCOPE/);
  assert.match(introduction, /X-Service-Signature/);

  const start = OPERATIONS.find((op) => op.operationId === 'startConversation')!;
  const block = `#operations-${start.tag}-${start.operationId}`;
  await page.click(`${block} .opblock-summary`);
  await page.waitForSelector(`${block} .responses-wrapper`);
  const description = (await page.textContent(`${block} .opblock-description-wrapper`)) ?? '';
  assert.match(description, /Scopes: conversations:write/);
  assert.match(description, /recipient_no_consent \(409\)/);
  const conflict = `${block} .response[data-code="409"]`;
  const options = await page.$$eval(`${conflict} select option`, (nodes) => nodes.map((node) => node.textContent?.trim() ?? ''));
  assert.ok(options.includes('recipient_no_consent') && options.includes('The same Idempotency-Key with a different request'), options.join(' | '));
  const shown = (await page.textContent(`${conflict} .example, ${conflict} .microlight`)) ?? '';
  assert.match(shown, /"reason": "recipient_no_consent"/, 'the operation’s own refusal is the example shown first');
  const forbidden = (await page.textContent(`${block} .response[data-code="403"]`)) ?? '';
  assert.match(forbidden, /"missingScopes"/);
  assert.doesNotMatch(forbidden, /"code": "string"/, 'no placeholder example');

  const webhooks = await page.$$eval('.webhooks .opblock-summary-path', (nodes) => nodes.map((node) => node.textContent?.trim() ?? ''));
  for (const type of EVENT_TYPES) assert.ok(webhooks.some((text) => text.includes(type)), `webhook ${type} listed: ${webhooks.join(', ')}`);
  assert.deepEqual(errors, []);
  await page.close();
});

test('docs assets are served by the server; unknown assets are 404 in the envelope', async () => {
  const css = await fetch(`${origin}/m2m/v1/docs/assets/swagger-ui.css`);
  assert.equal(css.status, 200);
  assert.match(css.headers.get('content-type') ?? '', /text\/css/);
  const missing = await fetch(`${origin}/m2m/v1/docs/assets/..%2Fpackage.json`);
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).error.code, 'M2M_NOT_FOUND');
});
