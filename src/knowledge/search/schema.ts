import { Type } from 'typebox';
import { DateTime, Strict, StringEnum } from '../../http/schemas.js';
import { SOURCE_TYPES } from '../schema.js';

export const SearchBody = Type.Object(
  {
    query: Type.String({ minLength: 1, maxLength: 500, description: 'The question or words to look for, as a guest would write them (any language; English and Spanish are stemmed)' }),
    propertyId: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: "A propertyId (that property's knowledge and global knowledge), or global (global knowledge only); omit for all" })),
    sourceTypes: Type.Optional(Type.Array(StringEnum(SOURCE_TYPES), { minItems: 1, maxItems: SOURCE_TYPES.length, uniqueItems: true, description: 'Only these source types; website means crawled pages' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, default: 5 })),
  },
  Strict,
);

export const SearchResult = Type.Object(
  {
    sourceId: Type.String({ maxLength: 128, description: 'The source the passage is from (for a crawled page, the page)' }),
    websiteId: Type.Optional(Type.String({ maxLength: 128, description: 'The website of a crawled page' })),
    title: Type.String({ maxLength: 2048 }),
    url: Type.Optional(Type.String({ maxLength: 2048 })),
    text: Type.String({ description: 'The passage' }),
    score: Type.Number({ minimum: 0, maximum: 1, description: 'Relevance in 0..1, comparable across answers: the share of the question\'s rarer words the passage holds (times its keyword score relative to the best one), fused with its vector similarity to the question' }),
    updatedAt: DateTime,
  },
  { additionalProperties: false },
);

export const SearchResults = Type.Object({ results: Type.Array(SearchResult, { maxItems: 20 }) }, { additionalProperties: false });
