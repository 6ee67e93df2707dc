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
  const candidates = await searchRepo.search(db, {
    tenantId,
    query,
    propertyId: property === undefined ? undefined : property === 'global' ? null : property,
    kinds,
    vector,
    knownLarge,
  });
  const counted = candidates[0];
  if (counted && !knownLarge) deps.largeTenants?.record(tenantId, counted.large, Date.now());
  const best = weights.keyword + (vector ? weights.vector : 0);
  return { results: fuse(candidates, weights, input.limit ?? 5).map(({ row, score }) => resultOf(row, score / best)) };
}

/**
 * The passages of both sides in one order, best first (at most `limit`). Keyword side: a BM25-like score, the sum
 * over the question's terms a candidate holds of idf × its ts_rank there, the idf taken among the keyword candidates,
 * so that a rare word of the question ("sauna") outweighs a common one ("time"). Fused score: keyword weight ×
 * coverage × keyword score over the best keyword score + vector weight × cosine (both sides' strength counts, not
 * only their order: a weak side moves little). Coverage is the share of the question's idf weight (in whichever of
 * its two languages the passage covers better) that the passage holds: it makes the score absolute, so that a
 * passage sharing only one common word with a question that is about something else ("a good dentist nearby" → a
 * page saying "nearby") scores low instead of 1 for being the best of a bad lot. Reciprocal-rank fusion was measured
 * and left out: it gives a weak side's order as much say as a strong side's (docs/decisions.md, "Search").
 */
export function fuse(rows: readonly SearchRow[], weights: { keyword: number; vector: number }, limit: number): Array<{ row: SearchRow; score: number }> {
  const keyword = rows.filter((row) => row.term_ranks !== null);
  const languages = rows[0]?.languages ?? '';
  const idf: number[] = [];
  for (let i = 0; i < languages.length; i++) {
    const holding = keyword.filter((row) => row.term_ranks?.[i] != null).length;
    idf.push(Math.log(1 + (keyword.length - holding + 0.5) / (holding + 0.5)));
  }
  const english = (i: number) => languages[i] !== 's';
  const spanish = (i: number) => languages[i] !== 'e';
  const weightOf = (language: (i: number) => boolean, holds: (i: number) => boolean) => idf.reduce((sum, w, i) => (language(i) && holds(i) ? sum + w : sum), 0);
  const totals = { english: weightOf(english, () => true), spanish: weightOf(spanish, () => true) };
  const keywordScores = keyword.map((row) => {
    const ranks = row.term_ranks ?? [];
    const holds = (i: number) => ranks[i] != null;
    const score = idf.reduce((sum, w, i) => sum + w * (ranks[i] ?? 0), 0);
    const coverage = Math.max(totals.english > 0 ? weightOf(english, holds) / totals.english : 0, totals.spanish > 0 ? weightOf(spanish, holds) / totals.spanish : 0);
    return { row, score, coverage };
  });
  const bestKeyword = Math.max(0, ...keywordScores.map((k) => k.score));
  const fused = new Map<SearchRow, number>();
  if (bestKeyword > 0) for (const k of keywordScores) fused.set(k.row, weights.keyword * k.coverage * (k.score / bestKeyword));
  for (const row of rows) if (row.sim !== null) fused.set(row, (fused.get(row) ?? 0) + weights.vector * row.sim);
  return [...fused]
    .filter(([, score]) => score > 0)
    .sort(([a, x], [b, y]) => y - x || compare(a.source_id, b.source_id) || a.seq - b.seq)
    .slice(0, limit)
    .map(([row, score]) => ({ row, score }));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
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

/** A fused passage as the API answers it; `score` is already over the most the sides could give. */
function resultOf(row: SearchRow, score: number): SearchResult {
  return {
    sourceId: row.source_id,
    ...(row.website_id ? { websiteId: row.website_id } : {}),
    title: row.title ?? '',
    ...(row.url ? { url: row.url } : {}),
    text: row.text,
    score: Math.min(1, Math.round(score * 10000) / 10000),
    updatedAt: row.updated_at.toISOString(),
  };
}
