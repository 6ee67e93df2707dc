import type { Queryable } from '../../db/driver.js';
import type { SourceKind } from '../repo.js';

/**
 * A candidate level ranks all the tenant's chunks its query matches by ts_rank, as a bare full-text search does, and
 * keeps the visible ones among its best this many (visibility is a few index lookups per chunk, where a common word's
 * matches are thousands): the keyword side's candidates, ranked again by the fusion (search.ts).
 */
export const KEYWORD_DEPTH = 20;
/**
 * Up to this many chunks in the tenant, the vector side scores every visible chunk; past it, only the keyword side's
 * candidates (it re-ranks them). A hotel's knowledge is a few hundred chunks; a scan of a large tenant's chunks on
 * every question is what the keyword side's index is there to avoid.
 */
export const VECTOR_SCAN_LIMIT = 2000;
/** How many passages the vector side gives to fusion, best first by the cosine of their sign sketches. */
export const VECTOR_DEPTH = 20;
/**
 * A small tenant's fallback level, any word of the question, ranks the first this many chunks holding one (in no
 * particular order beyond that): all of them, on a knowledge base of a few hundred chunks. A large tenant falls back
 * to every word but one instead: there a common word is in tens of thousands of chunks.
 */
export const ANY_WORD_LIMIT = 500;

export interface SearchParams {
  tenantId: string;
  query: string;
  /** undefined: every property and global knowledge; null: global knowledge only; an id: that property's and global. */
  propertyId: string | null | undefined;
  kinds: readonly SourceKind[];
  /** The query's vector sketch, of the embedder whose chunks it is compared with; absent: no vector side. */
  vector?: { model: string; sketch: string; swapped: string; nonZero: number };
  /** The tenant was lately counted with more than VECTOR_SCAN_LIMIT chunks (see LargeTenants): searched as large, uncounted. */
  knownLarge: boolean;
}

/** A candidate of either side, with what the fusion needs and what a result cites. */
export interface SearchRow {
  source_id: string;
  seq: number;
  /** A keyword candidate: ts_rank of each of the question's terms (knowledge_question's order), null where it lacks it. */
  term_ranks: Array<number | null> | null;
  /** A vector candidate: the cosine of its sketch with the question's (positive). */
  sim: number | null;
  /** Whose lexeme each of the question's terms is, a letter each: e English, s Spanish, b both (the same on every row). */
  languages: string;
  website_id: string | null;
  title: string | null;
  url: string | null;
  text: string;
  updated_at: Date;
  /** Whether the tenant has more than VECTOR_SCAN_LIMIT chunks (true when knownLarge was). */
  large: boolean;
}

/**
 * The parameters as the statement reads them where they could steer the plan: each through a sub-select, which the
 * planner evaluates once at run time instead of folding it into a constant, so that no estimate, and so no plan,
 * depends on which tenant, question or scope it is. See SEARCH for why.
 */
const TENANT = '(SELECT $1::text)';
const QUESTION = '(SELECT $2::text)';
const PROPERTY = '(SELECT $3::text)';
const GLOBAL_ONLY = '(SELECT $4::boolean)';
const KINDS = '(SELECT $5::text[])::text[]';
const MODEL = '(SELECT $6::text)';

/**
 * Which chunks a question may find, joined on `c` (anything with a chunk's source_id) and `s` (its source): active
 * sources of the tenant of the kinds asked for, and a crawled page only while its website is active, its
 * generation is the website's current one and the selection rules leave it enabled. Read on every search, so
 * deactivating or deleting a source takes its chunks out of the very next answer. The scope of a page is its
 * website's. $1 tenant, $3 property id or null, $4 global only, $5 kinds.
 */
const VISIBLE = `
  JOIN knowledge_sources s ON s.id = c.source_id AND s.tenant_id = ${TENANT}
  LEFT JOIN knowledge_websites w ON w.id = s.website_id AND w.tenant_id = s.tenant_id
  LEFT JOIN knowledge_sources ws ON ws.id = w.source_id AND ws.tenant_id = w.tenant_id
  WHERE s.active AND s.kind = ANY (${KINDS})
    AND (s.kind <> 'website_page' OR (s.enabled AND ws.active AND s.website_generation_id = w.current_generation_id))
    AND CASE WHEN ${GLOBAL_ONLY} THEN (CASE WHEN s.kind = 'website_page' THEN ws.property_id ELSE s.property_id END) IS NULL
             WHEN ${PROPERTY} IS NULL THEN true
             ELSE coalesce(CASE WHEN s.kind = 'website_page' THEN ws.property_id ELSE s.property_id END, ${PROPERTY}) = ${PROPERTY} END`;

/** What a result cites, read where visibility reads the source (`c` the chunk, `s` its source) and carried along. */
const CITED = 'c.text, s.website_id, s.title, coalesce(s.canonical_url, s.url) AS url, s.updated_at';
const CARRIED = 'text, website_id, title, url, updated_at';

/**
 * The candidate level `name`: the tenant's chunks matching q's `query` (with `firstMatches`, only the first that many
 * found, in no particular order), the ids of the best KEYWORD_DEPTH of them by ts_rank against q's `rankBy`. Runs only
 * when `when` holds (a condition on the levels before it, evaluated once per search). Visibility is applied to the
 * levels' ids together (KEYWORD).
 */
function rankedLevel(name: string, query: 'every_word' | 'but_one' | 'any_word', rankBy: 'every_word' | 'any_word', when: string, firstMatches?: number): string {
  return `
${name} AS (
  SELECT source_id, seq
  FROM (
    SELECT source_id, seq, ts_rank(search_vector, (SELECT ${rankBy} FROM q)) AS rank
    FROM knowledge_chunks
    WHERE tenant_id = ${TENANT} AND search_vector @@ (SELECT ${query} FROM q) AND ${when}${firstMatches ? `
    LIMIT ${firstMatches}` : ''}
  ) AS matches
  ORDER BY rank DESC, source_id, seq
  LIMIT ${KEYWORD_DEPTH}
),`;
}

/**
 * The keyword side's candidates: the visible chunks among the levels' ids, with what a result cites. Each candidate's
 * words are taken once into memory: a stored tsvector is kept compressed, and each term's rank in the final select
 * would decompress it again. setweight to D is the identity here (to_tsvector gives every position weight D); it
 * returns the vector as a new, uncompressed value.
 */
const KEYWORD = `
keyword AS (
  SELECT c.source_id, c.seq, setweight(c.search_vector, 'D') AS search_vector, c.embedding_model, c.embedding_signs, ${CITED}
  FROM (SELECT source_id, seq FROM every_level UNION ALL SELECT source_id, seq FROM fallback_level) AS best
  JOIN knowledge_chunks c ON c.source_id = best.source_id AND c.seq = best.seq ${VISIBLE}
),`;

/**
 * Whether the tenant has at most VECTOR_SCAN_LIMIT chunks, counted in the tenant index's order, so that the count
 * stops at the limit whatever the tenant's size. Left out of the statement for a tenant known to be large.
 */
const FEW = `
few AS (
  SELECT (SELECT count(*) <= ${VECTOR_SCAN_LIMIT} FROM (SELECT 1 FROM knowledge_chunks WHERE tenant_id = ${TENANT} ORDER BY tenant_id, source_id, seq LIMIT ${VECTOR_SCAN_LIMIT} + 1) AS x) AS yes
),`;

/** The cosine of a chunk's sign sketch `signs` with the question's ($7, $8 its halves swapped, $9 its non-zero count). */
function cosine(signs: string): string {
  return `CASE WHEN length(${signs}) = length($7::varbit)
    THEN (bit_count(${signs} & $7::varbit) - bit_count(${signs} & $8::varbit))::float8 / sqrt(greatest(1, bit_count(${signs})) * greatest(1, $9::int)) END`;
}

/**
 * A tenant of any size: the vector side scores a few chunks all of them, read as the first VECTOR_SCAN_LIMIT of the
 * tenant's (which are all there are), many the keyword side's candidates. Bounded so in the statement itself: a
 * plan's estimate counts this branch even when the tenant is large and it never runs, and an estimate as large as a
 * scan of every chunk of a large tenant makes PostgreSQL compile the whole statement (JIT) on every search. Only a
 * positive cosine counts. The candidates are both sides' passages.
 */
const ANY_SIZE_CANDIDATES = `
pool AS (
  SELECT c.source_id, c.seq, c.embedding_signs AS signs, ${CITED}
  FROM (SELECT * FROM knowledge_chunks WHERE tenant_id = ${TENANT} AND (SELECT yes FROM few) AND EXISTS (SELECT 1 FROM q)
        ORDER BY tenant_id, source_id, seq LIMIT ${VECTOR_SCAN_LIMIT}) AS c ${VISIBLE}
    AND c.embedding_model = ${MODEL}
  UNION ALL
  SELECT source_id, seq, embedding_signs, ${CARRIED}
  FROM keyword
  WHERE NOT (SELECT yes FROM few) AND embedding_model = ${MODEL}
),
vector AS (
  SELECT source_id, seq, sim, ${CARRIED}
  FROM (SELECT source_id, seq, ${CARRIED}, ${cosine('signs')} AS sim FROM pool) AS scored
  WHERE sim > 0
  ORDER BY sim DESC, source_id, seq
  LIMIT ${VECTOR_DEPTH}
),
candidates AS (
  SELECT k.source_id, k.seq, k.search_vector, v.sim, k.${CARRIED.split(', ').join(', k.')}
  FROM keyword k LEFT JOIN vector v ON v.source_id = k.source_id AND v.seq = k.seq
  UNION ALL
  SELECT v.source_id, v.seq, NULL, v.sim, v.${CARRIED.split(', ').join(', v.')}
  FROM vector v
  WHERE NOT EXISTS (SELECT 1 FROM keyword k WHERE k.source_id = v.source_id AND k.seq = v.seq)
)`;

/** A large tenant: the vector side scores the keyword side's candidates, which are all the candidates. */
const LARGE_CANDIDATES = `
candidates AS (
  SELECT source_id, seq, search_vector, CASE WHEN sim > 0 THEN sim END AS sim, ${CARRIED}
  FROM (SELECT *, CASE WHEN embedding_model = ${MODEL} THEN ${cosine('embedding_signs')} END AS sim FROM keyword) AS scored
)`;

/**
 * The candidates of hybrid search in one statement, the same on PostgreSQL and PGlite; search.ts ranks and fuses them.
 * Keyword side: the question's queries (knowledge_question: its words as English or Spanish lexemes, as its language
 * tells). Candidates: the chunks holding every word of the question; when the tenant has none (a guest writes a
 * sentence, not a list of words every passage must hold), on a small knowledge base those holding any of its words,
 * on a large one, where a common word is in tens of thousands of chunks, those holding every word but one; of the
 * level's best, the visible ones (visibility read once for both levels: one join in the plan, not two). Each
 * candidate comes with the ts_rank of each of the question's terms, for the fusion's rarity weighting. A question
 * with no lexeme finds nothing on either side.
 * Vector side: chunks with a stored vector of the question's model, scored by the cosine of their ternary sign
 * sketches (bits where components are positive, bits where they are negative): the cosine of the vectors with each
 * component reduced to its sign, from native bit operations on a few dozen bytes. The exact cosine of the real[]
 * vectors was measured and left out: a product of two arrays in SQL is a row per component, which made it the
 * largest cost of a search on a large knowledge base, and on the hotel questions hybrid ranking did no worse
 * without it (docs/decisions.md, "Search").
 * $1 tenant, $2 query, $3 property, $4 global only, $5 kinds, $6 model, $7 the question's sketch, $8 its halves
 * swapped, $9 its non-zero count. A tenant known to be large (SearchParams.knownLarge) is searched by a statement
 * without the count and the scan of a small tenant's vectors.
 * One plan for every search: the code's constants are literals of the text, not parameters; the parameters that
 * could steer the plan are read through sub-selects (TENANT, QUESTION, …), and the levels' queries from q, so no
 * estimate depends on the values (a folded question would be estimated from the full-text statistics, a folded
 * tenant from its share of the rows). The generic plan of the named statement then costs what a custom one does,
 * and PostgreSQL keeps it instead of planning this statement again on every search. The plan the estimates give is
 * the one wanted for any tenant: the tenant's full-text index entries of the level's words.
 */
function searchStatement(knownLarge: boolean): string {
  return `
WITH q AS MATERIALIZED (
  SELECT * FROM knowledge_question(${QUESTION})
),
${knownLarge ? '' : FEW}
${rankedLevel('every_level', 'every_word', 'every_word', 'true')}
${knownLarge
  ? rankedLevel('fallback_level', 'but_one', 'any_word', 'NOT EXISTS (SELECT 1 FROM every_level)')
  : rankedLevel('fallback_level', 'any_word', 'any_word', 'NOT EXISTS (SELECT 1 FROM every_level)', ANY_WORD_LIMIT)}
${KEYWORD}
${knownLarge ? LARGE_CANDIDATES : ANY_SIZE_CANDIDATES}
SELECT c.source_id, c.seq,
  CASE WHEN c.search_vector IS NOT NULL THEN
    ARRAY(SELECT CASE WHEN c.search_vector @@ t THEN ts_rank(c.search_vector, t) END FROM unnest(q.terms) AS t)
  END AS term_ranks,
  c.sim, q.languages, c.${CARRIED.split(', ').join(', c.')}, ${knownLarge ? 'true' : 'NOT (SELECT yes FROM few)'} AS large
FROM candidates c CROSS JOIN q`;
}

const SEARCH = { anySize: searchStatement(false), large: searchStatement(true) };

export const searchRepo = {
  async search(db: Queryable, p: SearchParams): Promise<SearchRow[]> {
    return db.query<SearchRow>(p.knownLarge ? SEARCH.large : SEARCH.anySize, [
      p.tenantId,
      p.query,
      p.propertyId ?? null,
      p.propertyId === null,
      p.kinds,
      p.vector?.model ?? null,
      p.vector?.sketch ?? '0',
      p.vector?.swapped ?? '0',
      p.vector?.nonZero ?? 0,
    ]);
  },
};
