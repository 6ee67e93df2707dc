import { Type } from 'typebox';
import { defineAdminOperation } from '../admin/define.js';
import { Ref, Strict } from '../http/schemas.js';
import { UPLOAD_BODY_LIMIT } from './common.js';
import { CreateWebsiteBody } from './crawler/schema.js';
import { AssetFolder, CreateAssetBody, CreateFolderBody, CreateSourceBody, KnowledgeAsset, KnowledgeSource, KnowledgeWebsite } from './schema.js';

const TenantParams = Type.Object({ tenantId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

/** Sources, asset folders, assets and websites as the dashboard creates them (201 with the created record). */
export const knowledgeAdminOperations = [
  defineAdminOperation({
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
    handler: (services, ctx, input) => services.knowledge.createSource(ctx, input),
  }),
  defineAdminOperation({
    operationId: 'createAssetFolder',
    method: 'POST',
    path: '/tenants/{tenantId}/knowledge/asset-folders',
    summary: 'Create an asset folder',
    params: TenantParams,
    body: CreateFolderBody,
    status: 201,
    response: Ref(AssetFolder),
    errors: [404],
    handler: (services, ctx, input) => services.knowledgeAssets.createFolder(ctx, input),
  }),
  defineAdminOperation({
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
    handler: (services, ctx, input) => services.knowledgeAssets.createAsset(ctx, input),
  }),
  defineAdminOperation({
    operationId: 'createWebsite',
    method: 'POST',
    path: '/tenants/{tenantId}/knowledge/websites',
    summary: 'Create a managed website, with its first crawl queued',
    params: TenantParams,
    body: CreateWebsiteBody,
    status: 201,
    response: Ref(KnowledgeWebsite),
    errors: [404],
    handler: (services, ctx, input) => services.crawls.createWebsiteItem(ctx, input),
  }),
];
