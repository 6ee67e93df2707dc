import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { principalOf } from '../http/auth.js';
import { errorResponses } from '../http/schemas.js';
import type { Services } from '../services.js';
import { UPLOAD_BODY_LIMIT } from './common.js';
import type { CreatedBy } from './repo.js';
import {
  AssetEnvelope,
  CreateFolderBody,
  CreateSourceBody,
  FolderEnvelope,
  FolderParams,
  ItemsQuery,
  KnowledgeItems,
  MoveAssetBody,
  PatchFolderBody,
  SourceEnvelope,
  SourceParams,
} from './schema.js';

const tags = ['Knowledge'];

function keyActor(request: FastifyRequest): CreatedBy {
  const principal = principalOf(request);
  return { id: principal.apiKeyId, displayName: principal.apiKeyName.slice(0, 160) };
}

/** Public knowledge routes: thin, each calls one service method. */
export function knowledgeRoutes(services: Services) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const { knowledge, knowledgeAssets } = services;
    const tenant = (request: FastifyRequest) => principalOf(request).tenantId;

    app.get('/knowledge/items', {
      config: { scopes: ['knowledge:read'] },
      schema: {
        tags,
        summary: 'Inventory of text, file and URL sources and managed websites (title/URL search, not semantic)',
        querystring: ItemsQuery,
        response: { 200: KnowledgeItems, ...errorResponses(404, 409) },
      },
    }, async (request) => knowledge.listItems(tenant(request), request.query));

    app.patch('/knowledge/asset-folders/:folderId', {
      config: { scopes: ['knowledge:write'] },
      schema: {
        tags,
        summary: 'Edit an asset folder; scope changes propagate to its assets, active false revokes its share links',
        params: FolderParams,
        body: PatchFolderBody,
        response: { 200: FolderEnvelope, ...errorResponses(404) },
      },
    }, async (request) => knowledgeAssets.updateFolder(tenant(request), request.params.folderId, request.body));

    app.patch('/knowledge/sources/:sourceId/folder', {
      config: { scopes: ['knowledge:write'] },
      schema: {
        tags,
        summary: 'Move an asset into a folder (it takes the folder scope) or out of it (null)',
        params: SourceParams,
        body: MoveAssetBody,
        response: { 200: AssetEnvelope, ...errorResponses(404, 409) },
      },
    }, async (request) => knowledgeAssets.moveAsset(tenant(request), request.params.sourceId, request.body.folderId));

    app.post('/knowledge/sources', {
      config: { scopes: ['knowledge:write'] },
      bodyLimit: UPLOAD_BODY_LIMIT,
      schema: {
        tags,
        summary: 'Add a text, URL or file source; it is ingested in the background (chunkCount is 0 until then)',
        body: CreateSourceBody,
        response: { 201: SourceEnvelope, ...errorResponses(404, 413) },
        'x-extension': true,
      },
    }, async (request, reply) => reply.status(201).send({ source: await knowledge.createSource(tenant(request), keyActor(request), request.body) }));

    app.post('/knowledge/asset-folders', {
      config: { scopes: ['knowledge:write'] },
      schema: { tags, summary: 'Create an asset folder', body: CreateFolderBody, response: { 201: FolderEnvelope, ...errorResponses(404) }, 'x-extension': true },
    }, async (request, reply) => reply.status(201).send({ folder: await knowledgeAssets.createFolder(tenant(request), request.body) }));
  };
}
