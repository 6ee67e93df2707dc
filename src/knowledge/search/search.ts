import type { Static } from 'typebox';
import type { Ctx } from '../../context.js';
import type { Db } from '../../db/driver.js';
import { invalid } from '../../errors.js';
import type { Logger } from 'pino';
import { requireProperty } from '../common.js';
import type { Embedder } from '../crawler/embedder.js';
import type { SourceKind } from '../repo.js';
import type { SearchBody, SearchResults } from './schema.js';
import type { LargeTenants } from './large-tenants.js';
import { searchRepo, type SearchRow } from './search-repo.js';

type SearchInput = Static<typeof SearchBody>;
type SearchResult = Static<typeof SearchResults>['results'][number];

/** Which sides rank: the public operation is always hybrid; the benchmark compares each side alone. */
export type SearchMode = 'hybrid' | 'keyword' | 'vector';

const KINDS: Record<NonNullable<SearchInput['sourceTypes']>[number], SourceKind[]> = {
  text: ['text'],
  file: ['file'],
  url: ['url'],
  website: ['website_page'],
};
const ALL_KINDS: SourceKind[] = ['text', 'file', 'url', 'website_page'];

/**
 * How much the vector side counts against the keyword side in hybrid mode: a passage's score is its coverage
 * of the question's words times its keyword score over the best keyword score, plus this times its cosine. Chosen on the hotel benchmark (bench/search.ts)
 * with the local embedder, whose vectors share the keyword side's vocabulary: at equal weight they repeat it.
 */
const HYBRID_VECTOR_WEIGHT = 0.5;
const WEIGHTS: Record<SearchMode, { keyword: number; vector: number }> = {
  hybrid: { keyword: 1, vector: HYBRID_VECTOR_WEIGHT },
  keyword: { keyword: 1, vector: 0 },
  vector: { keyword: 0, vector: 1 },
};

/**
 * A vector's ternary sign sketch as SQL's knowledge_embedding_signs writes it (positive bits, then negative
 * bits), and the same with its halves swapped: a chunk's sketch AND the first counts agreeing signs, AND the
 * second disagreeing ones.
 */
export function signSketch(vector: readonly number[]): { sketch: string; swapped: string; nonZero: number } {
  let positive = '';
  let negative = '';
  let nonZero = 0;
  for (const v of vector) {
    positive += v > 0 ? '1' : '0';
    negative += v < 0 ? '1' : '0';
    if (v !== 0) nonZero += 1;
  }
  return { sketch: positive + negative, swapped: negative + positive, nonZero };
}

export interface SearchDeps {
  db: Db;
  embedder: Embedder;
  log?: Logger;
  /** The tenants lately found large, kept across searches; absent: every search counts its tenant's chunks. */
  largeTenants?: LargeTenants;
}

/**
 * Finds the passages of the tenant's knowledge that answer `query`, best first, each citing its source.
 * The score is the fused score over the most the sides could give: 1 is the best keyword passage holding every
 * word of the question whose vector is the question's own.
 */
export async function searchKnowledge(deps: SearchDeps, ctx: Ctx, input: SearchInput, mode: SearchMode = 'hybrid'): Promise<{ results: SearchResult[] }> {
  const { tenantId } = ctx;
  const db = ctx.tx ?? deps.db;
  const query = input.query.trim();
  if (query.length === 0) throw invalid('body.query', 'must not be blank');
  const property = input.propertyId;
  if (property !== undefined && property !== 'global') await requireProperty(db, tenantId, property);
  const kinds = input.sourceTypes ? [...new Set(input.sourceTypes.flatMap((type) => KINDS[type]))] : ALL_KINDS;
  const weights = WEIGHTS[mode];
  const vector = weights.vector > 0 ? await embedQuery(deps, query) : undefined;
  const knownLarge = deps.largeTenants?.has(tenantId, Date.now()) ?? false;
  const rows = await searchRepo.search(db, {
    tenantId,
    query,
    propertyId: property === undefined ? undefined : property === 'global' ? null : property,
    kinds,
    vector,
    weights,
    limit: input.limit ?? 5,
    knownLarge,
  });
  const counted = rows[0];
  if (counted && !knownLarge) deps.largeTenants?.record(tenantId, counted.large, Date.now());
  const best = weights.keyword + (vector ? weights.vector : 0);
  return { results: rows.map((row) => resultOf(row, best)) };
}

/**
 * The question's vector sketch. An embeddings endpoint that fails leaves the keyword side to answer alone:
 * a search that answers from keywords is better than none while the endpoint is down.
 */
async function embedQuery(deps: SearchDeps, query: string): Promise<{ model: string; sketch: string; swapped: string; nonZero: number } | undefined> {
  try {
    const [vector] = await deps.embedder.embed([query]);
    return vector ? { model: deps.embedder.model, ...signSketch(vector) } : undefined;
  } catch (error) {
    deps.log?.warn({ err: error }, 'knowledge search: the query could not be embedded; answering from keywords only');
    return undefined;
  }
}

function resultOf(row: SearchRow, best: number): SearchResult {
  return {
    sourceId: row.source_id,
    ...(row.website_id ? { websiteId: row.website_id } : {}),
    title: row.title ?? '',
    ...(row.url ? { url: row.url } : {}),
    text: row.text,
    score: best > 0 ? Math.min(1, Math.round((row.score / best) * 10000) / 10000) : 0,
    updatedAt: row.updated_at.toISOString(),
  };
}
