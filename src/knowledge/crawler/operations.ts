import { defineOperation } from '../../operations/define.js';
import { CrawlJobEnvelope, CrawlJobParams, CrawlJobs, CrawlListQuery, StartCrawlBody, UpdateWebsiteBody, WebsiteEnvelope, WebsiteParams } from './schema.js';
import type { CrawlService } from './service.js';

/** What the crawl operations call. */
export interface CrawlOperationServices {
  crawls: CrawlService;
}

const common = { area: 'knowledge', tag: 'Knowledge' } as const;
const at = '2026-11-24T10:00:00.000Z';
const job = {
  jobId: 'crj_4r5t6y7u8i9o0p1a2s3d',
  status: 'running' as const,
  progress: { phase: 'crawling' as const, pagesDiscovered: 42, pagesProcessed: 17, chunksEmbedded: 0 },
  url: 'https://hotel.example/',
  crawlDepth: 3,
  maxPages: 100,
  sourceId: 'ks_5g6h7j8k9l0z1x2c3v4b',
  websiteId: 'web_6h7j8k9l0z1x2c3v4b5n',
  createdAt: at,
  startedAt: at,
  updatedAt: at,
};

export const crawlOperations = [
  defineOperation({
    ...common,
    operationId: 'listCrawlJobs',
    sdk: 'knowledge.crawls.list',
    method: 'GET',
    path: '/knowledge/url/crawl',
    summary: 'Recent website crawl jobs',
    description: 'Website crawl jobs newest first: queued and running ones (status active, the default) or all. A bounded list (limit up to 100), no cursor.',
    scopes: ['knowledge:read'],
    query: CrawlListQuery,
    status: 200,
    response: CrawlJobs,
    examples: { response: { jobs: [job] } },
    handler: (s: CrawlOperationServices, ctx, input) => s.crawls.listJobs(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'startCrawl',
    sdk: 'knowledge.crawls.start',
    method: 'POST',
    path: '/knowledge/url/crawl',
    summary: 'Crawl a website into knowledge',
    description:
      'Starts a crawl of a managed website (websiteId), or adds a website and crawls it (rootUrl, crawlDepth, maxPages). The crawl runs in the background; follow it with getCrawlJob. One queued or running crawl per website: another start is 409 naming the active job.',
    scopes: ['knowledge:write'],
    body: StartCrawlBody,
    status: 202,
    response: CrawlJobEnvelope,
    errors: [
      404,
      { status: 409, code: 'M2M_CONFLICT', message: 'a crawl of this website is already queued or running', details: { jobId: 'crj_3e4r5t6y7u8i9o0p1a2s', websiteId: 'web_8u7y6t5r4e3w2q1a0s9d' } },
      { status: 409, code: 'M2M_CONFLICT', message: 'a website with this root URL and scope exists already; start a crawl of it with its websiteId', details: { websiteId: 'web_8u7y6t5r4e3w2q1a0s9d' } },
    ],
    extension: true,
    hints: { openWorld: true },
    examples: { request: { rootUrl: 'https://hotel.example/', crawlDepth: 3, maxPages: 100 }, response: { job: { ...job, status: 'queued', progress: { phase: 'queued', pagesDiscovered: 0, pagesProcessed: 0, chunksEmbedded: 0 } } } },
    handler: async (s: CrawlOperationServices, ctx, input) => ({ job: (await s.crawls.start(ctx, input)).job }),
  }),
  defineOperation({
    ...common,
    operationId: 'getCrawlJob',
    sdk: 'knowledge.crawls.get',
    method: 'GET',
    path: '/knowledge/url/crawl/{jobId}',
    summary: 'Read a crawl job',
    description: 'One crawl job with its progress, and the pages it could not store (at most 100) with the reason.',
    scopes: ['knowledge:read'],
    params: CrawlJobParams,
    status: 200,
    response: CrawlJobEnvelope,
    errors: [404],
    extension: true,
    examples: { response: { job: { ...job, status: 'completed', completedAt: at }, failedPages: [{ url: 'https://hotel.example/old-offer', code: 'http_status', message: 'HTTP 404' }] } },
    handler: (s: CrawlOperationServices, ctx, input) => s.crawls.getJob(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'updateWebsite',
    sdk: 'knowledge.websites.update',
    method: 'PATCH',
    path: '/knowledge/websites/{websiteId}',
    summary: 'Edit a managed website',
    description:
      "Changes a website's title, recrawl interval (recrawlIntervalHours, null: never by itself), defaultEnabled or selection rules. Changed rules apply to the pages of its current crawl at once, without crawling. Answers the website item with its recrawl schedule beside it.",
    scopes: ['knowledge:write'],
    params: WebsiteParams,
    body: UpdateWebsiteBody,
    status: 200,
    response: WebsiteEnvelope,
    errors: [404],
    extension: true,
    hints: { idempotent: true },
    examples: {
      request: { recrawlIntervalHours: 24, selectionRules: [{ kind: 'path', key: '/blog', enabled: false }] },
      response: {
        website: {
          websiteId: job.websiteId,
          sourceId: job.sourceId,
          sourceType: 'website',
          active: true,
          scope: 'global',
          title: 'Hotel Sol',
          url: job.url,
          rootUrl: job.url,
          normalizedRootUrl: job.url,
          chunkCount: 212,
          crawlDepth: 3,
          maxPages: 100,
          status: 'idle',
          defaultEnabled: true,
          selectionRules: [{ kind: 'path', key: '/blog', enabled: false }],
          totalPages: 48,
          enabledPages: 41,
          lastCrawledAt: at,
        },
        recrawlIntervalHours: 24,
        nextCrawlAt: '2026-11-25T10:00:00.000Z',
      },
    },
    handler: (s: CrawlOperationServices, ctx, input) => s.crawls.updateWebsite(ctx, input),
  }),
];
