import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { M2MClient } from '../../packages/client/src/index.js';
import { createAutoReplier } from '../../packages/client/examples/auto-reply.js';
import { WebchatProvider } from '../../src/channels/webchat/provider.js';
import { systemClock } from '../../src/clock.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { gradientPng, webchatWorld } from '../helpers/webchat.js';

// The webchat widget in a real browser (Debian's chromium, as the docs-page test): a plain HTML page on 127.0.0.1
// embeds the snippet, a guest chats, and the auto-reply example (packages/client/examples/auto-reply.ts) answers
// through the API and the webchat provider. With WEBCHAT_SCREENSHOTS=1 the test also writes docs/webchat-*.png:
//   WEBCHAT_SCREENSHOTS=1 node --import tsx --test test/channels/webchat-browser.test.ts

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOTS = process.env.WEBCHAT_SCREENSHOTS === '1';
const WAIT = { timeout: 60_000 };

let app: TestApp;
let apiOrigin: string;
let browser: Browser;
let replier: http.Server;
const pages: http.Server[] = [];
let site: string;
let foreign: string;
let world: Awaited<ReturnType<typeof webchatWorld>>;

function hotelPage(widgetId: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Hotel Mirador</title>
<style>body{font-family:Georgia,serif;margin:0;color:#222;background:#faf7f2}header{background:#2f3e46;color:#fff;padding:28px 32px}main{padding:24px 32px;max-width:720px}</style></head>
<body><header><h1>Hotel Mirador</h1><p>Sea views, late breakfast, and a pool that stays open until midnight.</p></header>
<main><h2>Rooms</h2><p>Twelve rooms facing the bay, each with a balcony. Ask us anything in the chat.</p></main>
<script src="${apiOrigin}/webchat/v1/widget.js" data-widget-id="${widgetId}" async></script>
</body></html>`;
}

async function servePage(html: () => string): Promise<string> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(html());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  pages.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', WEBHOOK_RETRY_DELAYS_MS: '50,50,50,50,50,50' } });
  await app.runtime.app.listen({ port: 0, host: '127.0.0.1' });
  apiOrigin = `http://127.0.0.1:${(app.runtime.app.server.address() as AddressInfo).port}`;

  let widgetId = '';
  site = await servePage(() => hotelPage(widgetId));
  foreign = await servePage(() => hotelPage(widgetId));
  world = await webchatWorld(app, [site], ['webhooks:write', 'conversations:write', 'messages:read']);
  widgetId = world.widgetId;

  // The auto-reply example, subscribed to message.created exactly as its own test does.
  const client = new M2MClient({ apiKey: world.key, baseUrl: `${apiOrigin}/m2m/v1` });
  const subscription = await client.webhooks.create({ url: 'http://127.0.0.1:9/placeholder', events: ['message.created'] });
  replier = createAutoReplier({ client, secret: subscription.secret! });
  await new Promise<void>((resolve) => replier.listen(0, '127.0.0.1', resolve));
  await client.webhooks.update({ subscriptionId: subscription.subscriptionId, url: `http://127.0.0.1:${(replier.address() as AddressInfo).port}/hook` });

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  if (SCREENSHOTS) mkdirSync('docs', { recursive: true });
});
after(async () => {
  await browser?.close();
  replier?.closeAllConnections();
  await new Promise<void>((resolve) => (replier ? replier.close(() => resolve()) : resolve()));
  for (const server of pages) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await app?.close();
});

/** The element inside the widget's shadow root that has focus (tag and class). */
function focused(page: Page): Promise<string> {
  return page.evaluate(() => {
    const active = document.querySelector('[data-m2m-webchat]')?.shadowRoot?.activeElement;
    return active ? `${active.tagName.toLowerCase()}.${active.className}` : '';
  });
}

function bubbles(page: Page, direction: 'in' | 'out') {
  return page.locator(`.msg.${direction}`);
}

async function openWidget(page: Page): Promise<void> {
  await page.locator('button.launcher').click();
  await page.locator('section.panel').waitFor({ state: 'visible', ...WAIT });
}

function sessionCount(): Promise<number> {
  return app.runtime.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM webchat_sessions WHERE widget_id = $1`, [world.widgetId]).then((rows) => Number(rows[0].n));
}

test('a guest chats from a plain page: the auto-reply appears live, typing and "seen" show, and a reload keeps the conversation', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  const requested: string[] = [];
  page.on('request', (request) => requested.push(request.url()));
  await page.goto(site);
  const launcher = page.locator('button.launcher');
  await launcher.waitFor({ state: 'visible', ...WAIT });
  assert.equal(await launcher.getAttribute('aria-label'), 'Open chat');
  assert.equal(await launcher.getAttribute('aria-expanded'), 'false');
  if (SCREENSHOTS) await page.screenshot({ path: 'docs/webchat-closed.png' });

  await openWidget(page);
  assert.equal(await focused(page), 'textarea.', 'focus moves into the panel');
  assert.equal(await launcher.getAttribute('aria-expanded'), 'true');
  assert.equal(await page.locator('.log').getAttribute('aria-live'), 'polite');
  assert.equal(await page.locator('button.close').getAttribute('aria-label'), 'Close chat');

  await page.locator('textarea').fill('Hello! Is late check-out possible on Sunday?');
  await page.keyboard.press('Enter');
  await bubbles(page, 'in').first().waitFor(WAIT);
  assert.equal(await bubbles(page, 'in').first().textContent(), 'Hello! Is late check-out possible on Sunday?');
  assert.equal(await page.locator('textarea').inputValue(), '', 'Enter sent the message');

  // The auto-reply example answers through the API; the answer reaches the widget over its stream.
  await bubbles(page, 'out').first().waitFor(WAIT);
  const answer = (await bubbles(page, 'out').first().textContent()) ?? '';
  assert.ok(answer.trim().length > 0, 'the reply has text');

  // The business marks the conversation read and types: the guest sees both.
  const visitorId = await page.evaluate((key) => (JSON.parse(localStorage.getItem(key) ?? '{}') as { visitorId?: string }).visitorId, `m2m-webchat:${world.widgetId}`);
  assert.ok(visitorId, 'the session is kept in localStorage');
  const provider = new WebchatProvider(app.runtime.services.db, systemClock);
  const connection = { provider: 'webchat' as const, widgetId: world.widgetId, allowedOrigins: [site] };
  const ownId = await bubbles(page, 'in').first().getAttribute('data-message-id');
  await provider.send({ kind: 'read_receipt', providerMessageId: ownId!, typingIndicator: false, recipient: { handle: visitorId } }, connection, new AbortController().signal);
  await page.locator('.seen').waitFor(WAIT);
  assert.equal(await page.locator('.seen').textContent(), 'Seen');
  // A photo and a document from the business: the photo shows inline, the document as a download link.
  const signal = new AbortController().signal;
  const photo = await provider.upload({ mediaKind: 'image', contentType: 'image/png', filename: 'sea-view.png', bytes: await gradientPng(240, 140, [70, 150, 210], [240, 215, 160]) }, connection, signal);
  await provider.send({ kind: 'media', mediaKind: 'image', providerMediaId: photo.providerMediaId, caption: 'The view from room 12', recipient: { handle: visitorId } }, connection, signal);
  const pdf = await provider.upload({ mediaKind: 'document', contentType: 'application/pdf', filename: 'rates.pdf', bytes: Buffer.from('%PDF-1.4\n%%EOF\n') }, connection, signal);
  await provider.send({ kind: 'media', mediaKind: 'document', providerMediaId: pdf.providerMediaId, recipient: { handle: visitorId } }, connection, signal);
  await page.locator('.msg.out img[alt="sea-view.png"]').waitFor(WAIT);
  await page.waitForFunction(() => {
    const img = document.querySelector('[data-m2m-webchat]')?.shadowRoot?.querySelector('.msg.out img');
    return img instanceof HTMLImageElement && img.complete && img.naturalWidth === 240;
  }, undefined, WAIT);
  const link = page.locator('.msg.out a', { hasText: 'rates.pdf' });
  await link.waitFor(WAIT);
  assert.equal(await link.getAttribute('download'), 'rates.pdf');
  const download = await page.evaluate(async (href) => (await fetch(href)).status, (await link.getAttribute('href'))!);
  assert.equal(download, 200);
  await provider.send({ kind: 'typing', recipient: { handle: visitorId } }, connection, signal);
  await page.locator('.status[data-typing]').waitFor(WAIT);
  assert.match((await page.locator('.status').textContent()) ?? '', /Typing/);
  if (SCREENSHOTS) await page.screenshot({ path: 'docs/webchat-open.png' });

  // Escape closes the panel and gives focus back to the launcher.
  await page.keyboard.press('Escape');
  await page.locator('section.panel').waitFor({ state: 'hidden', ...WAIT });
  assert.equal(await focused(page), 'button.launcher');

  // A reload keeps the session and shows the conversation again.
  const sessions = await sessionCount();
  await page.reload();
  await openWidget(page);
  await bubbles(page, 'out').first().waitFor(WAIT);
  assert.equal(await bubbles(page, 'in').first().textContent(), 'Hello! Is late check-out possible on Sunday?');
  assert.equal(await bubbles(page, 'out').first().textContent(), answer);
  assert.equal(await sessionCount(), sessions, 'no new session after the reload');

  const offServer = requested.filter((url) => !url.startsWith(site) && !url.startsWith(apiOrigin) && !url.startsWith('data:'));
  assert.deepEqual(offServer, [], 'nothing is fetched from anywhere else (no CDN)');
  assert.deepEqual(errors, []);
  await context.close();
});

test('HTML and script in messages are shown as text and run nothing, both ways', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await page.goto(site);
  await page.locator('button.launcher').waitFor(WAIT);
  await openWidget(page);
  const hostile = '<img src=x onerror="window.__pwned=1;alert(1)"><script>window.__pwned=2</script><b>bold</b>';
  await page.locator('textarea').fill(hostile);
  await page.keyboard.press('Enter');
  await bubbles(page, 'in').first().waitFor(WAIT);
  assert.equal(await bubbles(page, 'in').first().textContent(), hostile);
  assert.equal(await page.locator('.msg img, .msg script, .msg b').count(), 0, 'no element was made from the text');

  // The business's text is text too.
  await bubbles(page, 'out').first().waitFor(WAIT);
  const conversations = (await app.api(world.key, 'GET', '/conversations')).json() as { conversations: Array<{ conversationId: string }> };
  const conversationId = await (async () => {
    for (const c of conversations.conversations) {
      const page2 = (await app.api(world.key, 'GET', `/conversations/${c.conversationId}/messages`)).json() as { messages: Array<{ text?: string }> };
      if (page2.messages.some((m) => m.text === hostile)) return c.conversationId;
    }
    return undefined;
  })();
  assert.ok(conversationId);
  const businessHtml = '<img src=y onerror="window.__pwned=3"> <a href="javascript:alert(2)">click</a>';
  const sent = await app.api(world.key, 'POST', `/conversations/${conversationId}/messages`, { text: businessHtml }, { 'idempotency-key': `xss-${Date.now()}` });
  assert.equal(sent.statusCode, 202, sent.body);
  await page.locator('.msg.out', { hasText: 'javascript:alert(2)' }).waitFor(WAIT);
  assert.equal(await page.locator('.msg img, .msg a').count(), 0);
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
  assert.deepEqual(dialogs, []);
  await context.close();
});

test('a page on an origin the channel does not allow is refused', async () => {
  const before = await sessionCount();
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(foreign);
  await page.locator('button.launcher').waitFor(WAIT);
  await openWidget(page);
  await page.locator('.status.error').waitFor(WAIT);
  assert.match((await page.locator('.status').textContent()) ?? '', /unavailable/);
  assert.equal(await sessionCount(), before, 'no session was created');
  // The same call made by the page's own script: the server answers 403 without CORS permission, so the browser refuses it.
  const outcome = await page.evaluate(async ([api, widgetId]) => {
    try {
      const res = await fetch(`${api}/webchat/v1/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ widgetId }) });
      return `status ${res.status}`;
    } catch (error) {
      return `blocked: ${(error as Error).name}`;
    }
  }, [apiOrigin, world.widgetId]);
  assert.equal(outcome, 'blocked: TypeError');
  await context.close();
});

test('on a phone-sized screen the panel fills the viewport and still sends', async () => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  await page.goto(site);
  await page.locator('button.launcher').waitFor(WAIT);
  await openWidget(page);
  const box = await page.locator('section.panel').boundingBox();
  assert.ok(box && Math.round(box.width) === 390 && Math.round(box.height) === 844, `panel ${JSON.stringify(box)}`);
  await page.locator('textarea').fill('Do you have a crib for a baby?');
  await page.locator('button.send').tap();
  await bubbles(page, 'out').first().waitFor(WAIT);
  if (SCREENSHOTS) await page.screenshot({ path: 'docs/webchat-phone.png' });
  await context.close();
});

test('a session that expired while away is replaced: the guest can write again', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(site);
  await page.locator('button.launcher').waitFor(WAIT);
  await openWidget(page);
  await page.locator('textarea').fill('First visit');
  await page.keyboard.press('Enter');
  await bubbles(page, 'out').first().waitFor(WAIT);
  const key = `m2m-webchat:${world.widgetId}`;
  const first = await page.evaluate((k) => (JSON.parse(localStorage.getItem(k) ?? '{}') as { visitorId?: string }).visitorId, key);
  await app.runtime.services.db.query(`UPDATE webchat_sessions SET last_seen_at = $2 WHERE id = $1`, [first, new Date(Date.now() - 31 * 24 * 3_600_000)]);

  await page.reload();
  await openWidget(page);
  await page.locator('textarea').fill('Back after a month');
  await page.keyboard.press('Enter');
  await page.locator('.msg.in', { hasText: 'Back after a month' }).waitFor(WAIT);
  await page.locator('.msg.out').first().waitFor(WAIT);
  const second = await page.evaluate((k) => (JSON.parse(localStorage.getItem(k) ?? '{}') as { visitorId?: string }).visitorId, key);
  assert.ok(second && second !== first, 'a new session');
  await context.close();
});

test('when the stream drops, the widget reconnects with Last-Event-ID and shows what was sent meanwhile', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const streamRequests: Array<Promise<Record<string, string>>> = [];
  page.on('request', (request) => {
    if (request.url().includes('/webchat/v1/stream')) streamRequests.push(request.allHeaders());
  });
  await page.goto(site);
  await page.locator('button.launcher').waitFor(WAIT);
  await openWidget(page);
  await page.locator('textarea').fill('Checking the connection');
  await page.keyboard.press('Enter');
  await bubbles(page, 'out').first().waitFor(WAIT);
  const visitorId = await page.evaluate((k) => (JSON.parse(localStorage.getItem(k) ?? '{}') as { visitorId?: string }).visitorId, `m2m-webchat:${world.widgetId}`);
  const [row] = await app.runtime.services.db.query<{ conversation_id: string }>(`SELECT conversation_id FROM webchat_sessions WHERE id = $1`, [visitorId]);

  // Every open connection of the API server is cut; a reply is sent while the widget is (most likely) away.
  app.runtime.app.server.closeAllConnections();
  const sent = await app.api(world.key, 'POST', `/conversations/${row.conversation_id}/messages`, { text: 'Sent while you were away' }, { 'idempotency-key': `away-${Date.now()}` });
  assert.equal(sent.statusCode, 202, sent.body);
  await page.locator('.msg.out', { hasText: 'Sent while you were away' }).waitFor(WAIT);
  const headers = await Promise.all(streamRequests);
  assert.ok(headers.length >= 2, 'the stream was opened again');
  assert.ok(headers.slice(1).some((h) => /^\d+$/.test(h['last-event-id'] ?? '')), `resumed with Last-Event-ID: ${JSON.stringify(headers.map((h) => h['last-event-id'] ?? null))}`);
  assert.equal(await page.locator('.msg.out', { hasText: 'Sent while you were away' }).count(), 1, 'shown once');
  await context.close();
});
