import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { checkCrawlUrl, cleanUrl, pageKey, pathOf, siteOf } from '../../src/knowledge/crawler/url.js';
import { parse } from 'node-html-parser';
import { extractPage } from '../../src/knowledge/crawler/extract.js';
import { htmlText } from '../../src/knowledge/html-text.js';
import { isEnabled, requiredUrls } from '../../src/knowledge/crawler/selection.js';
import { LocalEmbedder, RemoteEmbedder, EmbeddingError } from '../../src/knowledge/crawler/embedder.js';
import { CrawlFetcher, CrawlFetchError } from '../../src/knowledge/crawler/fetcher.js';
import { loadRobots } from '../../src/knowledge/crawler/robots.js';
import { lastmodMs, parseSitemap, sitemapUrls } from '../../src/knowledge/crawler/sitemap.js';
import { HostGate } from '../../src/knowledge/crawler/gate.js';
import { SiteCrawler, type PreviousPage } from '../../src/knowledge/crawler/crawler.js';
import { html, page, prose, startSite } from '../fixtures/site/server.js';
import { startReceiver } from '../helpers/receiver.js';

const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers) await close();
});

function fetcher(allowPrivate: boolean, resolver?: (host: string) => Promise<Array<{ address: string; family: 4 | 6 }>>) {
  const f = new CrawlFetcher({ allowPrivate, timeoutMs: 2000, maxBytes: 4096, userAgent: 'm2m-knowledge-crawler/1.0', connections: 2, resolver });
  closers.push(() => f.close());
  return f;
}

test('URL normalisation: fragment, tracking parameters, host case, default port, trailing slash', () => {
  const key = (raw: string) => pageKey(new URL(raw));
  assert.equal(key('HTTPS://Hotel.Example:443/Rooms/?utm_source=x&b=2&a=1&gclid=z&fbclid=y#top'), 'https://hotel.example/Rooms?a=1&b=2');
  assert.equal(key('http://hotel.example:80/'), 'http://hotel.example/');
  assert.equal(key('https://hotel.example/rooms?utm_medium=mail'), 'https://hotel.example/rooms');
  assert.equal(cleanUrl(new URL('https://hotel.example/rooms/?utm_x=1#a')).href, 'https://hotel.example/rooms/', 'requests keep the slash the site uses');
  // An empty fragment has an empty `hash` but is still in the URL.
  assert.equal(key('https://hotel.example/rooms#'), 'https://hotel.example/rooms');
  assert.equal(checkCrawlUrl('https://hotel.example/rooms#', false).href, 'https://hotel.example/rooms');
  assert.equal(checkCrawlUrl('https://hotel.example/rooms', false).href, 'https://hotel.example/rooms');
  assert.equal(siteOf(new URL('https://www.hotel.example/x')), siteOf(new URL('http://hotel.example/')));
  assert.equal(siteOf(new URL('https://WWW.Hotel.Example./x')), 'hotel.example');
  assert.equal(siteOf(new URL('http://www.hotel.example:8080/')), 'hotel.example:8080');
  assert.notEqual(siteOf(new URL('https://blog.hotel.example/')), siteOf(new URL('https://hotel.example/')));
  assert.notEqual(siteOf(new URL('http://127.0.0.1:81/')), siteOf(new URL('http://127.0.0.1:82/')));
  assert.equal(pathOf(new URL('https://hotel.example/blog/')), '/blog');
  assert.equal(pathOf(new URL('https://hotel.example/')), '/');
});

test('crawlable URLs with the escape hatch off: http(s) on default ports to public hosts only', () => {
  for (const ok of ['http://hotel.example/', 'https://hotel.example/a', 'https://93.184.216.34/', 'https://hotel.example:443/']) {
    assert.doesNotThrow(() => checkCrawlUrl(ok, false), ok);
  }
  for (const bad of [
    'ftp://hotel.example/', 'https://u:p@hotel.example/', 'http://127.0.0.1/', 'http://10.1.2.3/', 'http://localhost/', 'http://printer.local/',
    'http://[::1]/', 'https://hotel.example:8443/', 'http://169.254.169.254/latest', `https://hotel.example/${'a'.repeat(2050)}`, 'nonsense',
  ]) {
    assert.throws(() => checkCrawlUrl(bad, false), bad);
  }
  assert.doesNotThrow(() => checkCrawlUrl('http://127.0.0.1:8080/', true));
});

test('every request goes through the SSRF guard: a public name resolving to loopback is blocked', async () => {
  const site = await startSite({ '/robots.txt': { body: 'User-agent: *\nDisallow: /\n' } });
  closers.push(() => site.close());
  const resolver = async () => [{ address: '127.0.0.1', family: 4 as const }];
  const guarded = fetcher(false, resolver);
  await assert.rejects(guarded.get(new URL('http://public.example/'), () => true, '*/*'), (e: unknown) => e instanceof CrawlFetchError && e.code === 'blocked_destination');
  const robots = await loadRobots('http://public.example', { fetcher: guarded, allowPrivate: false, agentToken: 'm2m-knowledge-crawler', maxDelayMs: 1000 });
  assert.equal(robots.kind, 'disallow_all', 'robots.txt unreachable → nothing may be crawled');
  assert.equal(site.requests.length, 0);
});

test('robots.txt: groups for our agent, longest match, Allow wins ties, Crawl-delay capped, sitemaps; 4xx allows all', async () => {
  const site = await startSite({
    '/robots.txt': {
      body: [
        'User-agent: *', 'Disallow: /', '',
        'User-agent: M2M-Knowledge-Crawler', 'Disallow: /private', 'Allow: /private/ok', 'Disallow: /*.pdf$', 'Crawl-delay: 30', '',
        'Sitemap: http://127.0.0.1/sitemap-a.xml',
      ].join('\n'),
    },
  });
  closers.push(() => site.close());
  const f = fetcher(true);
  const robots = await loadRobots(site.origin, { fetcher: f, allowPrivate: true, agentToken: 'm2m-knowledge-crawler', maxDelayMs: 5000 });
  const allows = (path: string) => robots.allows(new URL(path, site.origin));
  assert.equal(allows('/rooms'), true);
  assert.equal(allows('/private/x'), false);
  assert.equal(allows('/private/ok/page'), true);
  assert.equal(allows('/menu.pdf'), false);
  assert.equal(allows('/menu.pdf?x=1'), true);
  assert.equal(robots.crawlDelayMs, 5000, 'capped at CRAWL_MAX_DELAY_MS');
  assert.deepEqual(robots.sitemaps, ['http://127.0.0.1/sitemap-a.xml']);

  site.routes['/robots.txt'] = { status: 403, body: 'no' };
  const forbidden = await loadRobots(site.origin, { fetcher: f, allowPrivate: true, agentToken: 'm2m-knowledge-crawler', maxDelayMs: 0 });
  assert.equal(forbidden.kind, 'allow_all');
  site.routes['/robots.txt'] = { status: 500, body: 'no' };
  assert.equal((await loadRobots(site.origin, { fetcher: f, allowPrivate: true, agentToken: 'm2m-knowledge-crawler', maxDelayMs: 0 })).kind, 'disallow_all');
});

test('page bodies: plain, gzip and brotli are decoded; over maxBytes is too_large; a corrupt encoding is no answer', async () => {
  const site = await startSite({});
  closers.push(() => site.close());
  const text = `<p>${'Habitación doble con vistas al mar. '.repeat(60)}</p>`;
  const htmlType = { 'content-type': 'text/html; charset=utf-8' };
  site.routes['/plain'] = { headers: htmlType, body: text };
  site.routes['/gzip'] = { headers: { ...htmlType, 'content-encoding': 'gzip' }, body: gzipSync(text) };
  site.routes['/br'] = { headers: { ...htmlType, 'content-encoding': 'br' }, body: brotliCompressSync(text) };
  site.routes['/big'] = { headers: htmlType, body: 'x'.repeat(4097) };
  site.routes['/bomb'] = { headers: { ...htmlType, 'content-encoding': 'gzip' }, body: gzipSync('y'.repeat(100_000)) };
  site.routes['/corrupt'] = { headers: { ...htmlType, 'content-encoding': 'gzip' }, body: Buffer.from('this is not gzip at all') };
  const f = new CrawlFetcher({ allowPrivate: true, timeoutMs: 2000, maxBytes: 4096, userAgent: 'm2m-knowledge-crawler/1.0', connections: 2 });
  closers.push(() => f.close());
  const get = (path: string) => f.get(new URL(path, site.origin), (type) => type.startsWith('text/html'), 'text/html');
  assert.ok(Buffer.byteLength(text) < 4096);
  for (const path of ['/plain', '/gzip', '/br']) assert.equal((await get(path)).body?.toString('utf8'), text, path);
  for (const path of ['/big', '/bomb']) {
    await assert.rejects(get(path), (error: unknown) => error instanceof CrawlFetchError && error.code === 'too_large', path);
  }
  await assert.rejects(get('/corrupt'), (error: unknown) => error instanceof CrawlFetchError && error.code === 'connection' && /could not be decoded/.test(error.message));
  // The fetcher is still usable after refusals (their connections were given up, not left half-read).
  assert.equal((await get('/plain')).body?.toString('utf8'), text);
});

test('sitemaps: url sets, indexes and gzip files, same site only', async () => {
  assert.deepEqual(parseSitemap('<urlset><url><loc> https://a.example/x?a=1&amp;b=2 </loc></url><url><loc><![CDATA[https://a.example/y]]></loc></url></urlset>'), {
    index: false,
    entries: [{ loc: 'https://a.example/x?a=1&b=2' }, { loc: 'https://a.example/y' }],
  });
  const site = await startSite({});
  closers.push(() => site.close());
  site.routes['/sitemap.xml'] = { body: `<sitemapindex><sitemap><loc>${site.origin}/a.xml.gz</loc></sitemap><sitemap><loc>https://other.example/s.xml</loc></sitemap></sitemapindex>` };
  site.routes['/a.xml.gz'] = { headers: { 'content-type': 'application/gzip' }, body: gzipSync(`<urlset><url><loc>${site.origin}/one</loc></url><url><loc>https://other.example/two</loc></url></urlset>`) };
  const urls = await sitemapUrls([new URL('/sitemap.xml', site.origin)], {
    fetcher: fetcher(true), allowPrivate: true, maxBytes: 100_000, sameSite: (u) => u.host === new URL(site.origin).host, allowed: async () => true, maxUrls: 10, maxFiles: 5,
  });
  assert.deepEqual(urls.map((u) => u.url.href), [`${site.origin}/one`]);
});

test('sitemaps: <lastmod> per <url>, read as the latest instant it can mean', () => {
  const { entries } = parseSitemap(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
    <url><lastmod>2026-11-20T10:15:00+01:00</lastmod><loc>https://a.example/a</loc></url>
    <url><loc>https://a.example/b</loc><lastmod>2026-11-20</lastmod><changefreq>daily</changefreq></url>
    <url><loc>https://a.example/c</loc></url>
    <url><loc>https://a.example/d</loc><lastmod>last tuesday</lastmod></url>
  </urlset>`);
  assert.deepEqual(entries, [
    { loc: 'https://a.example/a', lastmod: Date.parse('2026-11-20T09:15:00Z') },
    { loc: 'https://a.example/b', lastmod: Date.parse('2026-11-21T11:59:59.999Z') },
    { loc: 'https://a.example/c' },
    { loc: 'https://a.example/d' },
  ]);
  assert.equal(lastmodMs('2026-11-20T10:15:30.5Z'), Date.parse('2026-11-20T10:15:30.500Z'));
  assert.equal(lastmodMs('2026-11-20T10:15-03:30'), Date.parse('2026-11-20T13:45:00Z'));
  assert.equal(lastmodMs('2026-11-20T10:15'), Date.parse('2026-11-20T22:15:00Z'), 'no time zone: as at UTC-12');
  assert.equal(lastmodMs('2026-11'), Date.parse('2026-12-01T11:59:59.999Z'));
  assert.equal(lastmodMs('2026'), Date.parse('2027-01-01T11:59:59.999Z'));
  for (const bad of ['2026-13-01', '2026-11-20T25:00Z', 'yesterday', '']) assert.equal(lastmodMs(bad), undefined, bad);
});

test('extraction: main content preferred, chrome dropped, body fallback, links, canonical, meta robots', () => {
  const filler = 'Breakfast is served on the terrace from seven to eleven every day of the year. '.repeat(4);
  const page = extractPage(`<html><head><title> Rooms &amp; Suites </title><link rel="Canonical" href="/rooms"><meta name="robots" content="NOFOLLOW"></head>
    <body><header><a href="/a">Header link</a> Header words</header><nav>Menu words</nav>
    <main><article><header><h1>Our rooms</h1></header><p>${filler}</p><aside>Related</aside><script>var x = "<p>no</p>";</script></article></main>
    <footer>Footer words <a href="/b">B</a></footer></body></html>`);
  assert.equal(page.title, 'Rooms & Suites');
  assert.ok(page.text.startsWith('# Our rooms\n\nBreakfast'), page.text.slice(0, 40));
  for (const word of ['Header words', 'Menu words', 'Footer words', 'Related', 'var x']) assert.ok(!page.text.includes(word), word);
  assert.deepEqual(page.links, ['/a', '/b']);
  assert.equal(page.canonical, '/rooms');
  assert.equal(page.nofollow, true);
  assert.equal(page.noindex, false);

  const bare = extractPage(`<html><body><header>Top</header><div><p>${filler}</p></div><main><p>Tiny</p></main></body></html>`);
  assert.ok(bare.text.includes('Breakfast') && !bare.text.includes('Top'), 'a nearly empty <main> falls back to the body');
  assert.ok(extractPage('<html><body><p>Hi</p></body></html>').text.length < 200);

  const roles = extractPage(`<html><head><base href="/x/"><base href="/y/"><title>T</title><link rel="alternate" href="/alt"></head>
    <body><a href="">empty</a><div role="main"><p>${filler} Fish &amp; chips</p></div><map><area href="/m"></map><a>none</a></body></html>`);
  assert.equal(roles.base, '/x/', 'the first <base href>');
  assert.equal(roles.canonical, undefined);
  assert.ok(roles.text.endsWith('Fish & chips'), 'role="main" is the content root; entities decoded');
  assert.deepEqual(roles.links, ['/m'], 'links with an empty or no href are left out');
  const two = extractPage(`<html><body><article><p>${filler}</p></article><article><p>Second article words</p></article></body></html>`);
  assert.ok(two.text.includes('Second article words'), 'two <article>s and no <main>: the whole body');
  assert.equal(extractPage(`<html><body><h1>Heading only</h1><main><p>${filler}</p></main></body></html>`).title, 'Heading only', 'no <title>: the first <h1>');
});

test('selection rules: page and required rules first, then the longest path prefix, then defaultEnabled', () => {
  const root = new URL('https://hotel.example/');
  const rules = [
    { kind: 'path' as const, key: '/blog', enabled: false },
    { kind: 'path' as const, key: '/blog/news/', enabled: true },
    { kind: 'page' as const, key: '/blog/news/old', enabled: false },
    { kind: 'required' as const, key: 'https://www.hotel.example/terms', enabled: true },
  ];
  const on = (path: string, defaultEnabled = true) => {
    const key = pageKey(new URL(path, root));
    return isEnabled({ url: key, canonicalUrl: key, path: pathOf(new URL(path, root)) }, rules, defaultEnabled, root);
  };
  assert.equal(on('/blog'), false);
  assert.equal(on('/blog/post'), false);
  assert.equal(on('/blogger'), true, 'whole segments only');
  assert.equal(on('/blog/news/today'), true, 'the longer prefix wins');
  assert.equal(on('/blog/news/old'), false, 'an exact page rule wins');
  assert.equal(on('/rooms', false), false);
  assert.deepEqual(requiredUrls(rules, root).map((u) => u.href), ['https://www.hotel.example/terms']);
});

test('the local embedder is deterministic, normalised and ranks by shared words', async () => {
  const embedder = new LocalEmbedder();
  const [a, b, c] = await embedder.embed(['Breakfast on the terrace', 'breakfast ON the Terrace', 'Parking garage rates']);
  assert.equal(a.length, 256);
  assert.deepEqual(a, b);
  const dot = (x: number[], y: number[]) => x.reduce((s, v, i) => s + v * y[i], 0);
  assert.ok(Math.abs(dot(a, a) - 1) < 1e-9);
  assert.ok(dot(a, c) < 0.5);
  assert.equal(embedder.model, 'local-hash-256');
});

test('the local embedder gives the vectors it always gave, on its ASCII path and its general one alike', () => {
  const embedder = new LocalEmbedder();
  const digest = (text: string) => createHash('sha256').update(JSON.stringify(embedder.embedOne(text))).digest('hex');
  // Vectors stored by earlier versions stay comparable: the same model name means the same numbers.
  assert.equal(digest('Breakfast is served on the terrace from 7 to 10, late check-out until 1 pm.'), '7ffabd9de41607fbb366c22486f6d3bb9f4125ce43fd2138103d321f8b54418b');
  assert.equal(digest('Frühstück auf der Terrasse – 7 bis 10 Uhr; ¡Bienvenidos! 朝食'), '3eb70f95a8b9a479586e16b6a9d5e102c354e408abfdafe8a1a68e3c891f210a');
  // A trailing no-break space (not ASCII, not a word) sends the same text down the general path.
  const words = fc.array(fc.constantFrom('Room', 'room', 'ROOM', 'pool', 'pool2', '42', ' ', '  ', '\n', '.', "'", '-', 'x'), { maxLength: 80 }).map((w) => w.join(''));
  fc.assert(
    fc.property(fc.oneof(words, fc.string({ unit: 'binary-ascii', maxLength: 300 })), (text) => {
      assert.deepEqual(embedder.embedOne(text), embedder.embedOne(`${text}\u00a0`));
    }),
    { seed: 20261126, numRuns: 5_000 },
  );
  // More distinct words than the feature table starts with.
  const many = Array.from({ length: 3000 }, (_, i) => `w${i * 7919}`).join(' ');
  assert.deepEqual(embedder.embedOne(many), embedder.embedOne(`${many}\u00a0`));
});

test('the OpenAI-compatible embedder: request shape, ordering by index, errors', async () => {
  const receiver = await startReceiver((req, res, received) => {
    const body = JSON.parse(received.body);
    if (body.input.includes('fail')) return void res.writeHead(400).end('{"error":"bad"}');
    const data = body.input.map((_: string, i: number) => ({ index: i, embedding: [i, 1] })).reverse();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }));
  });
  closers.push(() => receiver.close());
  const remote = new RemoteEmbedder({ url: receiver.url, apiKey: 'sk-test', model: 'text-embedding-3-small', timeoutMs: 2000 });
  assert.deepEqual(await remote.embed(['a', 'b']), [[0, 1], [1, 1]]);
  assert.equal(receiver.received[0].headers.authorization, 'Bearer sk-test');
  assert.deepEqual(JSON.parse(receiver.received[0].body), { model: 'text-embedding-3-small', input: ['a', 'b'] });
  await assert.rejects(remote.embed(['fail']), EmbeddingError);
});

test('the host gate: at most `limit` at once; with a delay one at a time, spaced', async () => {
  const gate = new HostGate(2, 0);
  let active = 0;
  let peak = 0;
  const work = () => gate.run(async () => {
    peak = Math.max(peak, ++active);
    await new Promise((r) => setTimeout(r, 20));
    active -= 1;
  });
  await Promise.all(Array.from({ length: 6 }, work));
  assert.equal(peak, 2);
  const spaced = new HostGate(4, 60);
  const starts: number[] = [];
  await Promise.all(Array.from({ length: 3 }, () => spaced.run(async () => void starts.push(Date.now()))));
  assert.ok(starts[1] - starts[0] >= 55 && starts[2] - starts[1] >= 55, String(starts.map((s) => s - starts[0])));
});

test('a first crawl requests the root while the sitemap is read; a recrawl and a Crawl-delay host wait for it', async () => {
  const SITEMAP_DELAY_MS = 400;
  const site = await startSite({});
  closers.push(() => site.close());
  let sitemapAskedAt = 0;
  let rootAskedAt = 0;
  const setRoutes = (robots: string) => {
    site.routes = {
      '/robots.txt': { body: robots },
      '/sitemap.xml': () => {
        sitemapAskedAt = Date.now();
        return { headers: { 'content-type': 'application/xml' }, body: `<urlset><url><loc>${site.origin}/listed</loc></url></urlset>`, delayMs: SITEMAP_DELAY_MS };
      },
      '/': () => {
        rootAskedAt = Date.now();
        return html(page('Home', prose('Home'), ['/linked']));
      },
      '/listed': html(page('Listed', prose('Listed'))),
      '/linked': html(page('Linked', prose('Linked'))),
    };
  };
  const crawl = async (previous?: Map<string, PreviousPage>) => {
    const fetcher = new CrawlFetcher({ allowPrivate: true, timeoutMs: 5000, maxBytes: 1 << 20, userAgent: 'm2m-knowledge-crawler/1.0', connections: 4 });
    closers.push(() => fetcher.close());
    const crawler = new SiteCrawler(
      { root: new URL(`${site.origin}/`), crawlDepth: 2, maxPages: 10, rules: [], defaultEnabled: true, previous },
      { fetcher, allowPrivate: true, agentToken: 'm2m-knowledge-crawler', concurrencyPerHost: 4, maxDelayMs: 50, maxBytes: 1 << 20, deadlineMs: 30_000 },
    );
    const stored: string[] = [];
    await crawler.run(async (p) => void stored.push(new URL(p.url).pathname));
    return stored;
  };

  setRoutes('User-agent: *\nAllow: /\n');
  assert.deepEqual(await crawl(), ['/', '/listed', '/linked'], 'queue order: the root, the sitemap, then links');
  assert.ok(rootAskedAt - sitemapAskedAt < SITEMAP_DELAY_MS, `the root was asked for ${rootAskedAt - sitemapAskedAt} ms after the sitemap, before its answer`);

  const previous = new Map<string, PreviousPage>([[`${site.origin}/`, { id: 'p1', canonicalKey: `${site.origin}/`, links: [], etag: '"x"' }]]);
  await crawl(previous);
  assert.ok(rootAskedAt - sitemapAskedAt >= SITEMAP_DELAY_MS, 'a recrawl reads the sitemap first (its lastmods may carry pages over)');

  setRoutes('User-agent: *\nCrawl-delay: 1\n');
  await crawl();
  assert.ok(rootAskedAt - sitemapAskedAt >= SITEMAP_DELAY_MS, 'a host that asks for one request at a time gets one');
});

test('page text: whitespace collapses to single spaces in a paragraph, whatever mix of spaces, tabs, newlines and no-break spaces it had', () => {
  fc.assert(
    fc.property(fc.array(fc.constantFrom('a', 'b', 'é', ' ', '  ', '\t', '\n', '\r\n', '\u00a0'), { maxLength: 40 }), fc.array(fc.constantFrom('x', ' ', '\n'), { maxLength: 8 }), (first, second) => {
      const a = first.join('');
      const b = second.join('');
      const text = htmlText(parse(`<div><p>${a}</p><p>${b}</p></div>`), { keepLineBreaks: false });
      const expected = [a, b].map((s) => s.replace(/[ \t\r\n\u00a0]+/g, ' ').trim()).filter(Boolean);
      assert.equal(text, expected.join('\n\n'));
    }),
    { seed: 20261127, numRuns: 300 },
  );
});
