import { Type, type Static } from 'typebox';
import { DateTime, Ref, Strict, StringEnum } from '../http/schemas.js';
import { KnowledgeCrawlJob } from './crawler/schema.js';

/** Response shapes of the Knowledge part. Every object is closed: serialisation drops anything not listed. */
const closed = { additionalProperties: false } as const;
const Id = Type.String({ maxLength: 128 });
const Url = Type.String({ maxLength: 2048 });
const Stamp = Type.String({ maxLength: 128 });
const Count = Type.Integer({ minimum: 0 });

export const VALIDATION_STATUSES = ['unsupported', 'pending', 'ready', 'blocked', 'failed'] as const;

const CreatedBy = Type.Object(
  { id: Type.String({ maxLength: 128 }), displayName: Type.String({ maxLength: 160 }), email: Type.Optional(Type.String({ maxLength: 320 })) },
  closed,
);

export const KnowledgeAsset = Type.Object(
  {
    sourceId: Id,
    title: Type.String({ maxLength: 160 }),
    description: Type.Optional(Type.String({ maxLength: 600 })),
    mediaType: Type.Optional(StringEnum(['image', 'document'])),
    contentType: Type.String({ maxLength: 128 }),
    filename: Type.String({ maxLength: 255 }),
    sizeBytes: Count,
    active: Type.Boolean(),
    validationStatus: StringEnum(VALIDATION_STATUSES),
    validationFindings: Type.Array(Type.String({ maxLength: 2000 })),
    propertyId: Type.Optional(Id),
    propertyName: Type.Optional(Type.String({ maxLength: 160 })),
    folderId: Type.Optional(Id),
  },
  { $id: 'KnowledgeAsset', ...closed },
);

export const KnowledgeSource = Type.Object(
  {
    sourceId: Type.String(),
    sourceType: StringEnum(['text', 'file', 'url']),
    title: Type.Optional(Type.String()),
    active: Type.Boolean(),
    updatedAt: Type.Optional(DateTime),
    text: Type.Optional(Type.String()),
    url: Type.Optional(Type.String()),
    chunkCount: Type.Integer(),
    activeTokens: Type.Optional(Type.Integer()),
    scope: Type.Optional(StringEnum(['global', 'property'])),
    propertyId: Type.Optional(Type.String()),
    propertyName: Type.Optional(Type.String()),
    preview: Type.Optional(Type.String()),
    originalFile: Type.Optional(
      Type.Object({ filename: Type.String(), contentType: Type.String(), size: Type.Integer(), uploadedAt: Type.String() }, closed),
    ),
    asset: Type.Optional(Ref(KnowledgeAsset)),
    createdAt: Type.Optional(Stamp),
    createdBy: Type.Optional(CreatedBy),
    websiteId: Type.Optional(Id),
    websiteGenerationId: Type.Optional(Id),
    canonicalUrl: Type.Optional(Url),
    websiteGenerationState: Type.Optional(StringEnum(['staging', 'current', 'superseded'])),
  },
  { $id: 'KnowledgeSource', ...closed },
);

const WebsitePage = Type.Object(
  {
    sourceId: Id,
    url: Url,
    canonicalUrl: Url,
    path: Url,
    enabled: Type.Boolean(),
    chunkCount: Count,
    tokens: Type.Optional(Count),
    displayOrder: Type.Optional(Count),
    updatedAt: Type.Optional(Stamp),
  },
  closed,
);

export const KnowledgeWebsite = Type.Object(
  {
    websiteId: Id,
    sourceId: Id,
    sourceType: StringEnum(['website']),
    active: Type.Boolean(),
    scope: StringEnum(['property', 'global']),
    title: Type.String({ maxLength: 160 }),
    url: Url,
    rootUrl: Url,
    normalizedRootUrl: Url,
    chunkCount: Count,
    activeTokens: Type.Optional(Count),
    selectedTokens: Type.Optional(Count),
    createdBy: Type.Optional(CreatedBy),
    crawlDepth: Type.Integer({ minimum: 1, maximum: 10 }),
    maxPages: Type.Integer({ minimum: 1, maximum: 500 }),
    propertyId: Type.Optional(Id),
    propertyName: Type.Optional(Type.String({ maxLength: 160 })),
    status: StringEnum(['idle', 'crawling', 'failed']),
    defaultEnabled: Type.Boolean(),
    selectionRules: Type.Array(
      Type.Object({ kind: StringEnum(['path', 'page', 'required']), key: Type.String({ maxLength: 2048 }), enabled: Type.Boolean() }, closed),
    ),
    currentGenerationId: Type.Optional(Id),
    latestJob: Type.Optional(Ref(KnowledgeCrawlJob)),
    totalPages: Count,
    enabledPages: Count,
    pages: Type.Optional(Type.Array(WebsitePage, { maxItems: 500 })),
    createdAt: Type.Optional(Stamp),
    updatedAt: Type.Optional(Stamp),
    lastCrawledAt: Type.Optional(Stamp),
  },
  { $id: 'KnowledgeWebsite', ...closed },
);

export const KnowledgeItems = Type.Object(
  {
    // if/then/else on sourceType rather than anyOf: the serializer then checks one small condition per item
    // instead of validating each item against every branch.
    items: Type.Array(
      Type.Unsafe<Static<typeof KnowledgeWebsite> | Static<typeof KnowledgeSource>>({
        description: 'A knowledge source (sourceType text, file or url) or a knowledge website (sourceType website)',
        if: { type: 'object', properties: { sourceType: { const: 'website' } }, required: ['sourceType'] },
        then: { $ref: 'KnowledgeWebsite' },
        else: { $ref: 'KnowledgeSource' },
      }),
      { maxItems: 200 },
    ),
    nextCursor: Type.Optional(Type.String({ maxLength: 400 })),
  },
  closed,
);

export const AssetFolder = Type.Object(
  {
    folderId: Type.String(),
    title: Type.String(),
    active: Type.Boolean(),
    shareTokenVersion: Type.Integer(),
    assetOrder: Type.Array(Type.String()),
    assetCount: Type.Integer(),
    description: Type.Optional(Type.String()),
    propertyId: Type.Optional(Type.String()),
    propertyName: Type.Optional(Type.String()),
    createdAt: Type.Optional(Type.String()),
    updatedAt: Type.Optional(Type.String()),
    sharePath: Type.Optional(Type.String({ description: 'Extension: the signed public link of an active folder, relative to the server root' })),
  },
  { $id: 'AssetFolder', ...closed },
);

export const FolderEnvelope = Type.Object({ folder: Ref(AssetFolder) }, closed);
export const AssetEnvelope = Type.Object({ asset: Ref(KnowledgeAsset) }, closed);
export const SourceEnvelope = Type.Object({ source: Ref(KnowledgeSource) }, closed);
/** GET /knowledge/sources/{sourceId}: a text, file, url or website page source as `{source}`, an asset as `{asset}`. */
export const SourceOrAssetEnvelope = Type.Object(
  { source: Type.Optional(Ref(KnowledgeSource)), asset: Type.Optional(Ref(KnowledgeAsset)) },
  { ...closed, minProperties: 1, maxProperties: 1, description: 'Exactly one of source (a text, file, url or website page source) and asset (an asset source)' },
);
export const AssetFolders = Type.Object({ folders: Type.Array(Ref(AssetFolder), { maxItems: 200 }), nextCursor: Type.Optional(Type.String({ maxLength: 400 })) }, closed);

/** Schemas with an $id, added once at the root (src/app.ts). */
export const knowledgeSharedSchemas = [KnowledgeAsset, KnowledgeSource, KnowledgeWebsite, AssetFolder];

// ---- requests ----

export const SOURCE_TYPES = ['text', 'file', 'url', 'website'] as const;
const Title = Type.String({ minLength: 1, maxLength: 160 });
const Description = Type.String({ maxLength: 600 });
const PropertyRef = Type.String({ minLength: 1, maxLength: 128 });

export const ItemsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
    status: Type.Optional(StringEnum(['all', 'active', 'inactive'], { default: 'all' })),
    sourceType: Type.Optional(StringEnum(SOURCE_TYPES)),
    query: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Title/URL metadata search (not semantic)' })),
    propertyFilter: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'A propertyId, or global' })),
  },
  Strict,
);

export const FolderParams = Type.Object({ folderId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);
export const SourceParams = Type.Object({ sourceId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

export const PatchFolderBody = Type.Object(
  {
    title: Type.Optional(Title),
    description: Type.Optional(Description),
    propertyId: Type.Optional(Type.Union([PropertyRef, Type.Null()])),
    active: Type.Optional(Type.Boolean()),
  },
  { ...Strict, minProperties: 1 },
);

export const FolderListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  },
  Strict,
);

/** PATCH /knowledge/sources/{sourceId}: at least one field (an empty body is 400, as for folders). */
export const PatchSourceBody = Type.Object({ title: Type.Optional(Title), active: Type.Optional(Type.Boolean()) }, { ...Strict, minProperties: 1 });

export const MoveAssetBody = Type.Object({ folderId: Type.Union([Type.String({ minLength: 1, maxLength: 128 }), Type.Null()]) }, Strict);

export const CreateFolderBody = Type.Object(
  { title: Title, description: Type.Optional(Description), propertyId: Type.Optional(PropertyRef) },
  Strict,
);

/** Uploaded bytes: at most 10 MB once decoded (the request body limit is 15 MB). */
const Base64 = Type.String({ minLength: 1, description: 'The bytes, base64 encoded (at most 10 MB decoded)' });
const Filename = Type.String({ minLength: 1, maxLength: 255 });
const ContentType = Type.String({ minLength: 1, maxLength: 128 });

export const CreateSourceBody = Type.Object(
  {
    sourceType: StringEnum(['text', 'file', 'url']),
    title: Title,
    text: Type.Optional(Type.String({ minLength: 1, maxLength: 1_000_000 })),
    url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    file: Type.Optional(Type.Object({ filename: Filename, contentType: ContentType, contentBase64: Base64 }, Strict)),
    active: Type.Optional(Type.Boolean()),
    scope: Type.Optional(StringEnum(['global', 'property'])),
    propertyId: Type.Optional(PropertyRef),
  },
  Strict,
);

export const CreateAssetBody = Type.Object(
  {
    title: Title,
    filename: Filename,
    contentType: ContentType,
    contentBase64: Base64,
    description: Type.Optional(Description),
    propertyId: Type.Optional(PropertyRef),
    folderId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  Strict,
);

export const ShareParams = Type.Object({ folderId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);
export const ShareAssetParams = Type.Object(
  { folderId: Type.String({ minLength: 1, maxLength: 128 }), sourceId: Type.String({ minLength: 1, maxLength: 128 }) },
  Strict,
);
export const ShareQuery = Type.Object({ v: Type.Integer({ minimum: 1 }), sig: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);
