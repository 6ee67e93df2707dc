import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { principalOf } from '../../http/auth.js';
import { Strict, errorResponses } from '../../http/schemas.js';
import type { Services } from '../../services.js';
import { adminActor } from '../common.js';
import type { CreatedBy } from '../repo.js';
import { CrawlJobEnvelope, CrawlJobParams, CrawlJobs, CrawlListQuery, CreateWebsiteBody, StartCrawlBody } from './schema.js';

const tags = ['Knowledge'];

function keyActor(request: FastifyRequest): CreatedBy {
  const principal = principalOf(request);
  return { id: principal.apiKeyId, displayName: principal.apiKeyName.slice(0, 160) };
}

/** Public crawl routes: the spec's job list, and the extensions that start a crawl and read one job. */
export function crawlRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { crawls } = services;
    const tenant = (request: FastifyRequest) => principalOf(request).tenantId;

    app.get('/knowledge/url/crawl', {
      config: { scopes: ['knowledge:read'] },
      schema: {
        tags,
        summary: 'Recent website crawl jobs, newest first (bounded list, no cursor)',
        querystring: CrawlListQuery,
        response: { 200: CrawlJobs, ...errorResponses() },
      },
    }, async (request) => crawls.listJobs(tenant(request), request.query));

    app.post('/knowledge/url/crawl', {
      config: { scopes: ['knowledge:write'] },
      schema: {
        tags,
        summary: 'Start a crawl of a website (websiteId), or add a website and crawl it (rootUrl, crawlDepth, maxPages)',
        body: StartCrawlBody,
        response: { 202: CrawlJobEnvelope, ...errorResponses(404, 409) },
        'x-extension': true,
      },
    }, async (request, reply) => {
      const { job } = await crawls.start(tenant(request), keyActor(request), request.body);
      return reply.status(202).send({ job });
    });

    app.get('/knowledge/url/crawl/:jobId', {
      config: { scopes: ['knowledge:read'] },
      schema: {
        tags,
        summary: 'One crawl job, with the pages it could not store',
        params: CrawlJobParams,
        response: { 200: CrawlJobEnvelope, ...errorResponses(404) },
        'x-extension': true,
      },
    }, async (request) => crawls.getJob(tenant(request), request.params.jobId));
  };
}

const TenantParams = Type.Object({ tenantId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

/** Admin: a managed website, created with its first crawl queued (201 with the knowledge website item). */
export function crawlAdminRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    app.post('/tenants/:tenantId/knowledge/websites', {
      schema: { hide: true, params: TenantParams, body: CreateWebsiteBody },
    }, async (request, reply) => {
      await services.tenants.require(request.params.tenantId);
      return reply.status(201).send(await services.crawls.createWebsiteItem(request.params.tenantId, adminActor, request.body));
    });
  };
}
