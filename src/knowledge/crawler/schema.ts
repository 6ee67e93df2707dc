import { Type } from 'typebox';
import { Ref, Strict, StringEnum } from '../../http/schemas.js';

/** Shapes of the crawl routes. Responses are closed: serialisation drops anything not listed. */
const closed = { additionalProperties: false } as const;
const Id = Type.String({ maxLength: 128 });
const Stamp = Type.String({ maxLength: 128 });
const Count = Type.Integer({ minimum: 0 });

export const CRAWL_STATUSES = ['queued', 'running', 'completed', 'failed'] as const;
export const CRAWL_PHASES = ['queued', 'crawling', 'embedding', 'finalizing'] as const;

/** A completed crawl's pages against the previous current generation, by canonical URL and text hash. */
export const CrawlChanges = Type.Object(
  { new: Count, changed: Count, same: Count, removed: Count },
  { ...closed, description: "Pages against the previous current generation (by canonical URL and text hash); set once the crawl completed" },
);

export const ChangedPage = Type.Object(
  { url: Type.String({ maxLength: 2048 }), changeStatus: StringEnum(['new', 'changed', 'removed']) },
  closed,
);

export const KnowledgeCrawlJob = Type.Object(
  {
    jobId: Id,
    status: StringEnum(CRAWL_STATUSES),
    progress: Type.Object(
      { phase: StringEnum(CRAWL_PHASES), pagesDiscovered: Count, pagesProcessed: Count, chunksEmbedded: Count },
      closed,
    ),
    chunks: Type.Optional(Count),
    url: Type.String({ maxLength: 2048 }),
    crawlDepth: Type.Integer({ minimum: 1, maximum: 10 }),
    maxPages: Type.Integer({ minimum: 1, maximum: 500 }),
    sourceId: Id,
    error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() }, closed)),
    websiteId: Id,
    websiteGenerationId: Type.Optional(Id),
    createdAt: Stamp,
    startedAt: Type.Optional(Stamp),
    completedAt: Type.Optional(Stamp),
    updatedAt: Stamp,
    snapshotPages: Type.Optional(Count),
    changes: Type.Optional(CrawlChanges),
  },
  { $id: 'KnowledgeCrawlJob', ...closed },
);

/** Schemas with an $id, added once at the root (src/app.ts). */
export const crawlSharedSchemas = [KnowledgeCrawlJob];

export const CrawlJobs = Type.Object({ jobs: Type.Array(Ref(KnowledgeCrawlJob), { maxItems: 100 }) }, closed);

const FailedPage = Type.Object({ url: Type.String({ maxLength: 2048 }), code: Type.String(), message: Type.String() }, closed);
export const CrawlJobEnvelope = Type.Object(
  {
    job: Ref(KnowledgeCrawlJob),
    failedPages: Type.Optional(
      Type.Array(FailedPage, { maxItems: 100, description: 'Pages of this crawl that could not be stored (at most 100), with the reason' }),
    ),
    changedPages: Type.Optional(
      Type.Array(ChangedPage, { maxItems: 500, description: 'New, changed and removed pages of a completed crawl (at most 500); empty before it completes' }),
    ),
  },
  closed,
);

export const CrawlListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    status: Type.Optional(StringEnum(['active', 'all'], { default: 'active', description: 'active: queued or running jobs; all: also completed and failed' })),
  },
  Strict,
);

export const CrawlJobParams = Type.Object({ jobId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

const SelectionRuleInput = Type.Object(
  { kind: StringEnum(['path', 'page', 'required']), key: Type.String({ minLength: 1, maxLength: 2048 }), enabled: Type.Boolean() },
  Strict,
);

const websiteFields = {
  rootUrl: Type.String({ minLength: 1, maxLength: 2048 }),
  title: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
  crawlDepth: Type.Integer({ minimum: 1, maximum: 10 }),
  maxPages: Type.Integer({ minimum: 1, maximum: 500 }),
  scope: Type.Optional(StringEnum(['global', 'property'])),
  propertyId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  defaultEnabled: Type.Optional(Type.Boolean({ description: 'Extension: whether pages no rule matches are enabled (default true)' })),
  selectionRules: Type.Optional(Type.Array(SelectionRuleInput, { maxItems: 100, description: 'Extension: the website selection rules' })),
  recrawlIntervalHours: Type.Optional(
    Type.Union([Type.Integer({ minimum: 1, maximum: 720 }), Type.Null()], { description: 'Hours between crawls the workers start by themselves; null: never' }),
  ),
};

/** Admin: a managed website (a crawl is queued at once). */
export const CreateWebsiteBody = Type.Object(websiteFields, Strict);

/** Extension: start a crawl of an existing website (websiteId), or create a website and crawl it (rootUrl, crawlDepth, maxPages). */
export const StartCrawlBody = Type.Object(
  {
    websiteId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    rootUrl: Type.Optional(websiteFields.rootUrl),
    title: websiteFields.title,
    crawlDepth: Type.Optional(websiteFields.crawlDepth),
    maxPages: Type.Optional(websiteFields.maxPages),
    scope: websiteFields.scope,
    propertyId: websiteFields.propertyId,
    defaultEnabled: websiteFields.defaultEnabled,
    selectionRules: websiteFields.selectionRules,
    recrawlIntervalHours: websiteFields.recrawlIntervalHours,
  },
  Strict,
);

export const WebsiteParams = Type.Object({ websiteId: Type.String({ minLength: 1, maxLength: 128 }) }, Strict);

/** PATCH /knowledge/websites/{websiteId}: any of these (rules replace the website's, and apply to its pages at once). */
export const UpdateWebsiteBody = Type.Object(
  {
    title: Type.Optional(Type.String({ minLength: 1, maxLength: 160 })),
    recrawlIntervalHours: websiteFields.recrawlIntervalHours,
    defaultEnabled: websiteFields.defaultEnabled,
    selectionRules: websiteFields.selectionRules,
  },
  { ...Strict, minProperties: 1 },
);

export const WebsiteEnvelope = Type.Object(
  {
    website: Type.Ref('KnowledgeWebsite'),
    recrawlIntervalHours: Type.Union([Type.Integer({ minimum: 1, maximum: 720 }), Type.Null()], { description: 'The website\'s recrawl interval (the website item has no such field)' }),
    nextCrawlAt: Type.Optional(Type.String({ maxLength: 128, description: 'When the workers start the next scheduled crawl' })),
  },
  closed,
);
