import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Strict } from '../http/schemas.js';
import type { Services } from '../services.js';
import { adminCtx } from '../context.js';
import { UPLOAD_BODY_LIMIT } from './common.js';
import { CreateWebsiteBody } from './crawler/schema.js';
import { CreateAssetBody, CreateFolderBody, CreateSourceBody } from './schema.js';

const TenantParams = Type.Object({ tenantId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);
const hide = { hide: true };

/** Admin: sources, asset folders and assets as the dashboard creates them (201 with the created record). */
export function knowledgeAdminRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { knowledge, knowledgeAssets, tenants } = services;

    app.post('/tenants/:tenantId/knowledge/sources', {
      bodyLimit: UPLOAD_BODY_LIMIT,
      schema: { ...hide, params: TenantParams, body: CreateSourceBody },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await knowledge.createSource(adminCtx(request.params.tenantId, request.id), request.body));
    });

    app.post('/tenants/:tenantId/knowledge/asset-folders', {
      schema: { ...hide, params: TenantParams, body: CreateFolderBody },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await knowledgeAssets.createFolder(adminCtx(request.params.tenantId, request.id), request.body));
    });

    app.post('/tenants/:tenantId/knowledge/assets', {
      bodyLimit: UPLOAD_BODY_LIMIT,
      schema: { ...hide, params: TenantParams, body: CreateAssetBody },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await knowledgeAssets.createAsset(adminCtx(request.params.tenantId, request.id), request.body));
    });

    // A managed website, created with its first crawl queued (201 with the knowledge website item).
    app.post('/tenants/:tenantId/knowledge/websites', {
      schema: { ...hide, params: TenantParams, body: CreateWebsiteBody },
    }, async (request, reply) => {
      await tenants.require(request.params.tenantId);
      return reply.status(201).send(await services.crawls.createWebsiteItem(adminCtx(request.params.tenantId, request.id), request.body));
    });
  };
}
