import { Type } from 'typebox';
import { defineOperation } from '../operations/define.js';
import { Ref, Strict } from '../http/schemas.js';
import { UPLOAD_BODY_LIMIT } from './common.js';
import { CreateWebsiteBody } from './crawler/schema.js';
import { AssetFolder, CreateAssetBody, CreateFolderBody, CreateSourceBody, KnowledgeAsset, KnowledgeSource, KnowledgeWebsite } from './schema.js';
import type { AssetService } from './assets.js';
import type { CrawlService } from './crawler/service.js';
import type { KnowledgeService } from './service.js';

/** What the knowledge admin operations call. */
export interface KnowledgeAdminServices {
  crawls: CrawlService;
  knowledge: KnowledgeService;
  knowledgeAssets: AssetService;
}

const TenantParams = Type.Object({ tenantId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

/** Sources, asset folders, assets and websites as the dashboard creates them (201 with the created record). */
export const knowledgeAdminOperations = [
  defineOperation({
    surface: 'admin',
    operationId: 'createKnowledgeSource',
    method: 'POST',
    path: '/tenants/{tenantId}/knowledge/sources',
    summary: 'Create a text, file or URL knowledge source',
    params: TenantParams,
    body: CreateSourceBody,
    bodyLimit: UPLOAD_BODY_LIMIT,
    status: 201,
    response: Ref(KnowledgeSource),
    errors: [404, 413],
    handler: (services: KnowledgeAdminServices, ctx, input) => services.knowledge.createSource(ctx, input),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'createAssetFolder',
    method: 'POST',
    path: '/tenants/{tenantId}/knowledge/asset-folders',
    summary: 'Create an asset folder',
    params: TenantParams,
    body: CreateFolderBody,
    status: 201,
    response: Ref(AssetFolder),
    errors: [404],
    handler: (services: KnowledgeAdminServices, ctx, input) => services.knowledgeAssets.createFolder(ctx, input),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'createAsset',
    method: 'POST',
    path: '/tenants/{tenantId}/knowledge/assets',
    summary: 'Upload a knowledge asset',
    params: TenantParams,
    body: CreateAssetBody,
    bodyLimit: UPLOAD_BODY_LIMIT,
    status: 201,
    response: Ref(KnowledgeAsset),
    errors: [404, 413],
    handler: (services: KnowledgeAdminServices, ctx, input) => services.knowledgeAssets.createAsset(ctx, input),
  }),
  defineOperation({
    surface: 'admin',
    operationId: 'createWebsite',
    method: 'POST',
    path: '/tenants/{tenantId}/knowledge/websites',
    summary: 'Create a managed website, with its first crawl queued',
    params: TenantParams,
    body: CreateWebsiteBody,
    status: 201,
    response: Ref(KnowledgeWebsite),
    errors: [404],
    handler: (services: KnowledgeAdminServices, ctx, input) => services.crawls.createWebsiteItem(ctx, input),
  }),
];
