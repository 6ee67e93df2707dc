import type { Queryable } from '../../db/driver.js';
import type { SourceKind } from '../repo.js';

/**
 * How many passages the keyword side ranks before fusion: a candidate level's best by ts_rank, ranked again with
 * the rarity of the question's words. Both weigh how often and how densely a passage holds the words; the rarity
 * reorders a level's best rather than lifting passages from far below them, so those are the ones re-ranked.
 */
export const SIDE_DEPTH = 50;
/**
 * Up to this many chunks in the tenant, the vector side scores every visible chunk and the keyword side goes from
 * every word straight to any word; past it, the vector side scores only the keyword side's candidates (it re-ranks
 * them) and the keyword side tries every word but one first. A hotel's knowledge is a few hundred chunks; a scan of
 * a large tenant's chunks on every question is what the keyword side's index is there to avoid.
 */
export const VECTOR_SCAN_LIMIT = 2000;
/** How many passages the vector side gives to fusion, best first by the cosine of their sign sketches. */
export const VECTOR_DEPTH = 20;
/**
 * A ranked level orders all the tenant's chunks its query matches by ts_rank, as a bare full-text search does, and
 * checks only this many of the best for visibility (source, website, generation, property): the check is a few
 * index lookups per chunk, where a common word's matches are thousands. A level whose best are mostly invisible
 * finds fewer than STRICT_ENOUGH and gives way to the next; the last level checks visibility first.
 */
export const RANKED = 200;
/**
 * The last level, any word of the question, takes the first this many visible chunks holding one (in no particular
 * order beyond that) and ranks them: on a large knowledge base a common word is in tens of thousands of chunks. A
 * knowledge base of a few thousand chunks is ranked whole.
 */
export const ANY_WORD_LIMIT = 500;
/**
 * A level's chunks are the keyword side's candidates when there are at least this many; fewer, and the next
 * level's are. A constant, so that the ranking of the first results does not depend on how many the caller asked for.
 */
export const STRICT_ENOUGH = 5;

export interface SearchParams {
  tenantId: string;
  query: string;
  /** undefined: every property and global knowledge; null: global knowledge only; an id: that property's and global. */
  propertyId: string | null | undefined;
  kinds: readonly SourceKind[];
  /** The query's vector sketch, of the embedder whose chunks it is compared with; absent: no vector side. */
  vector?: { model: string; sketch: string; swapped: string; nonZero: number };
  /** The tenant was lately counted with more than VECTOR_SCAN_LIMIT chunks (see LargeTenants): not counted again. */
  knownLarge: boolean;
  weights: { keyword: number; vector: number };
  limit: number;
}

export interface SearchRow {
  score: number;
  source_id: string;
  kind: SourceKind;
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
const LIMIT = '(SELECT $12::int)';
const KNOWN_LARGE = '(SELECT $13::boolean)';

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

/**
 * The ranked candidate level `name`: the tenant's chunks matching q's `query`, the best RANKED of them by ts_rank
 * against q's `rankBy`, and of those the visible ones, best first (at most SIDE_DEPTH). Runs only when `when`
 * holds (a condition on the levels before it, evaluated once per search). The queries are q's columns, computed
 * once per search and read once by the index scan.
 */
function rankedLevel(name: string, query: 'every_word' | 'but_one', rankBy: 'every_word' | 'any_word', when: string): string {
  return `
${name}_ranked AS (
  SELECT c.source_id, c.seq, c.search_vector, c.embedding_model, c.embedding_signs, ts_rank(c.search_vector, (SELECT ${rankBy} FROM q)) AS rank
  FROM knowledge_chunks c
  WHERE c.tenant_id = ${TENANT} AND c.search_vector @@ (SELECT ${query} FROM q) AND ${when}
  ORDER BY rank DESC, c.source_id, c.seq
  LIMIT ${RANKED}
),
${name} AS (
  SELECT c.source_id, c.seq, c.search_vector, c.embedding_model, c.embedding_signs, c.rank
  FROM ${name}_ranked c ${VISIBLE}
  ORDER BY c.rank DESC, c.source_id, c.seq
  LIMIT ${SIDE_DEPTH}
),`;
}

/**
 * Hybrid search in one statement, the same on PostgreSQL and PGlite.
 * Keyword side: the question's words as english and as spanish lexemes (to_tsvector drops each language's
 * stop words and stems the rest). Candidates, level by level until one has STRICT_ENOUGH visible chunks: the chunks
 * holding every word of the question in one of the languages; on a large knowledge base (more than
 * VECTOR_SCAN_LIMIT chunks) then every word but one; then any of its words, at most ANY_WORD_LIMIT of them (a guest
 * writes a sentence, not a list of words every passage must hold); the q CTE writes each level's query, in the
 * statement itself (a SQL function is planned again on every call). Every word but one is for large knowledge bases
 * only: there any word means tens of thousands of chunks of which only an arbitrary few can be ranked, while a small
 * one ranks them all, and a passage holding the question's one rare word then outranks those holding its common
 * ones. The best candidates are ranked again by a BM25-like sum over the question's lexemes of idf × ts_rank, the
 * idf taken among those candidates, so that a rare word of the question ("sauna") outweighs a common one ("time").
 * A question with no lexeme left in english or none in spanish (only stop words of either, punctuation, emoji) finds
 * nothing on either side.
 * Vector side: chunks with a stored vector of the question's model, scored by the cosine of their ternary sign
 * sketches (bits where components are positive, bits where they are negative): the cosine of the vectors with each
 * component reduced to its sign, from native bit operations on a few dozen bytes. The exact cosine of the real[]
 * vectors was measured and left out: a product of two arrays in SQL is a row per component, which made it the
 * largest cost of a search on a large knowledge base, and on the hotel questions hybrid ranking did no worse
 * without it (docs/decisions.md, "Search").
 * Fusion: keyword weight × coverage × keyword score over the best keyword score + vector weight × cosine (both
 * sides' strength counts, not only their order: a weak side moves little). Coverage is the share of the question's
 * idf weight (in whichever of the two languages the passage covers better) that the passage holds: it makes the
 * score absolute, so that a passage sharing only one common word with a question that is about something else
 * ("a good dentist nearby" → a page saying "nearby") scores low instead of 1 for being the best of a bad lot.
 * Reciprocal-rank fusion was measured and left out: it gives a weak side's order as much say as a strong
 * side's (docs/decisions.md, "Search"; bench/search.ts).
 * $2 query, $6 model, $7 the question's sketch, $8 its halves swapped, $9 its non-zero count, $10 keyword weight,
 * $11 vector weight, $12 limit, $13 the tenant known to be large.
 * One plan for every search: the code's constants are literals of the text, not parameters; the parameters that
 * could steer the plan are read through sub-selects (TENANT, QUESTION, …), and the levels' queries from q, so no
 * estimate depends on the values (a folded question would be estimated from the full-text statistics, a folded
 * tenant from its share of the rows). The generic plan of the named statement then costs what a custom one does,
 * and PostgreSQL keeps it instead of planning this statement again on every search. The plan
 * the estimates give is the one wanted for any tenant: the tenant's full-text index entries of the level's words.
 */
const SEARCH = `
WITH lexemes AS (
  SELECT 'english' AS cfg, lexeme FROM unnest(tsvector_to_array(to_tsvector('english', ${QUESTION}))) AS lexeme
  UNION ALL
  SELECT 'spanish', lexeme FROM unnest(tsvector_to_array(to_tsvector('spanish', ${QUESTION}))) AS lexeme
),
language_terms AS (
  -- Each lexeme as a one-word query: quoted, so that it is taken as it is, never parsed as an operator. None when
  -- either language leaves no lexeme.
  SELECT DISTINCT cfg, lexeme, '''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''' AS term
  FROM lexemes
  WHERE (SELECT count(DISTINCT cfg) FROM lexemes) = 2
),
terms AS (
  -- Each lexeme once, with the languages whose terms it is.
  SELECT lexeme, term::tsquery AS tsq, bool_or(cfg = 'english') AS english, bool_or(cfg = 'spanish') AS spanish
  FROM language_terms
  GROUP BY lexeme, term
),
numbered AS (
  SELECT cfg, term, row_number() OVER (PARTITION BY cfg ORDER BY term) AS i, count(*) OVER (PARTITION BY cfg) AS n
  FROM language_terms
),
q AS (
  -- The levels' queries, once per search (NULL, matching nothing, when there is no term):
  --   every_word: every term of one of the languages;
  --   but_one:    every term but one (either of two; the term itself of one) of one of the languages; a language of
  --               more than 8 terms adds nothing (a passage holding all but one of so many is rare, and the query
  --               would grow with the square of the terms);
  --   any_word:   any term.
  SELECT
    (SELECT string_agg('(' || words || ')', ' | ')
     FROM (SELECT string_agg(term, ' & ' ORDER BY term) AS words FROM language_terms GROUP BY cfg) AS per_language)::tsquery AS every_word,
    (SELECT string_agg('(' || words || ')', ' | ')
     FROM (SELECT string_agg(kept.term, ' & ' ORDER BY kept.i) AS words
           FROM numbered omitted JOIN numbered kept ON kept.cfg = omitted.cfg AND (kept.i <> omitted.i OR omitted.n = 1)
           WHERE omitted.n <= 8
           GROUP BY omitted.cfg, omitted.i) AS clauses)::tsquery AS but_one,
    (SELECT string_agg(DISTINCT term, ' | ') FROM language_terms)::tsquery AS any_word
),
few AS (
  -- Counted only when the caller does not know the tenant to be large ($13; CASE leaves the count unread then, and
  -- so unrun), in the tenant index's order, so that the count stops at the limit whatever the tenant's size.
  SELECT CASE WHEN ${KNOWN_LARGE} THEN false
    ELSE (SELECT count(*) <= ${VECTOR_SCAN_LIMIT} FROM (SELECT 1 FROM knowledge_chunks WHERE tenant_id = ${TENANT} ORDER BY tenant_id, source_id, seq LIMIT ${VECTOR_SCAN_LIMIT} + 1) AS x)
  END AS yes
),
${rankedLevel('every_level', 'every_word', 'every_word', 'true')}
${rankedLevel('but_one_level', 'but_one', 'any_word', `NOT (SELECT yes FROM few) AND (SELECT count(*) FROM every_level) < ${STRICT_ENOUGH}`)}
any_level AS (
  SELECT m.source_id, m.seq, m.search_vector, m.embedding_model, m.embedding_signs
  FROM (
    SELECT c.source_id, c.seq, c.search_vector, c.embedding_model, c.embedding_signs
    FROM knowledge_chunks c ${VISIBLE}
      AND c.tenant_id = ${TENANT} AND c.search_vector @@ (SELECT any_word FROM q)
      AND (SELECT count(*) FROM every_level) < ${STRICT_ENOUGH} AND (SELECT count(*) FROM but_one_level) < ${STRICT_ENOUGH}
    LIMIT ${ANY_WORD_LIMIT}
  ) AS m
  ORDER BY ts_rank(m.search_vector, (SELECT any_word FROM q)) DESC, m.source_id, m.seq
  LIMIT ${SIDE_DEPTH}
),
matched AS (
  SELECT source_id, seq, search_vector, embedding_model, embedding_signs FROM every_level WHERE (SELECT count(*) FROM every_level) >= ${STRICT_ENOUGH}
  UNION ALL
  SELECT source_id, seq, search_vector, embedding_model, embedding_signs FROM but_one_level WHERE (SELECT count(*) FROM but_one_level) >= ${STRICT_ENOUGH}
  UNION ALL
  SELECT source_id, seq, search_vector, embedding_model, embedding_signs FROM any_level
),
candidates AS (
  -- Each candidate's words once in memory: a stored tsvector is kept compressed, and the ranking below tests every
  -- candidate against every lexeme of the question, which would decompress it each time. setweight to D is the
  -- identity here (to_tsvector gives every position weight D); it returns the vector as a new, uncompressed value.
  SELECT source_id, seq, setweight(search_vector, 'D') AS search_vector, embedding_model, embedding_signs FROM matched
),
hits AS (
  -- Each lexeme of the question a candidate holds, with its ts_rank there: computed once, read by all below.
  SELECT c.source_id, c.seq, t.lexeme, ts_rank(c.search_vector, t.tsq) AS rank
  FROM candidates c JOIN terms t ON c.search_vector @@ t.tsq
),
rarity AS (
  SELECT t.lexeme, t.english, t.spanish, ln(1 + ((SELECT count(*) FROM candidates) - count(h.seq) + 0.5) / (count(h.seq) + 0.5)) AS idf
  FROM terms t LEFT JOIN hits h ON h.lexeme = t.lexeme
  GROUP BY t.lexeme, t.english, t.spanish
),
totals AS (
  SELECT sum(idf) FILTER (WHERE english) AS english, sum(idf) FILTER (WHERE spanish) AS spanish FROM rarity
),
keyword AS (
  -- The score, and the coverage: the share of the question's idf weight the passage holds in whichever language it
  -- covers better (a language of which it holds no term does not count).
  SELECT h.source_id, h.seq, sum(r.idf * h.rank) AS score,
    coalesce(greatest(sum(r.idf) FILTER (WHERE r.english) / nullif((SELECT english FROM totals), 0),
                      sum(r.idf) FILTER (WHERE r.spanish) / nullif((SELECT spanish FROM totals), 0)), 0) AS coverage
  FROM hits h JOIN rarity r ON r.lexeme = h.lexeme
  GROUP BY h.source_id, h.seq
  ORDER BY score DESC, h.source_id, h.seq
  LIMIT ${SIDE_DEPTH}
),
pool AS (
  -- A few chunks: all of them, read as the first VECTOR_SCAN_LIMIT of the tenant's (which are all there are). Bounded so in the
  -- statement itself: a plan's estimate counts this branch even when the tenant is large and it never runs, and an
  -- estimate as large as a scan of every chunk of a large tenant makes PostgreSQL compile the whole statement (JIT)
  -- on every search.
  SELECT c.source_id, c.seq, c.embedding_signs AS signs
  FROM (SELECT * FROM knowledge_chunks WHERE tenant_id = ${TENANT} AND (SELECT yes FROM few) AND EXISTS (SELECT 1 FROM terms)
        ORDER BY tenant_id, source_id, seq LIMIT ${VECTOR_SCAN_LIMIT}) AS c ${VISIBLE}
    AND c.embedding_model = ${MODEL}
  UNION ALL
  -- Many chunks: the keyword side's candidates, whose sketches the candidate levels read already.
  SELECT c.source_id, c.seq, c.embedding_signs
  FROM candidates c
  WHERE NOT (SELECT yes FROM few) AND c.embedding_model = ${MODEL}
),
vector AS (
  -- Only a positive cosine counts.
  SELECT source_id, seq, sim
  FROM (
    SELECT source_id, seq,
      CASE WHEN length(signs) = length($7::varbit)
        THEN (bit_count(signs & $7::varbit) - bit_count(signs & $8::varbit))::float8 / sqrt(greatest(1, bit_count(signs)) * greatest(1, $9::int))
      END AS sim
    FROM pool
  ) AS scored
  WHERE sim > 0
  ORDER BY sim DESC, source_id, seq
  LIMIT ${VECTOR_DEPTH}
),
fused AS (
  SELECT source_id, seq, sum(part) AS score
  FROM (
    SELECT source_id, seq, $10::float8 * coverage * score / (SELECT max(score) FROM keyword) AS part FROM keyword
    UNION ALL
    SELECT source_id, seq, $11::float8 * sim FROM vector
  ) AS sides
  GROUP BY source_id, seq
  HAVING sum(part) > 0
  ORDER BY score DESC, source_id, seq
  LIMIT ${LIMIT}
)
SELECT f.score, s.id AS source_id, s.kind, s.website_id, s.title, coalesce(s.canonical_url, s.url) AS url, c.text, s.updated_at,
  NOT (SELECT yes FROM few) AS large
FROM fused f
JOIN knowledge_chunks c ON c.source_id = f.source_id AND c.seq = f.seq
JOIN knowledge_sources s ON s.id = c.source_id
ORDER BY f.score DESC, f.source_id, f.seq`;

export const searchRepo = {
  async search(db: Queryable, p: SearchParams): Promise<SearchRow[]> {
    const rows = await db.query<SearchRow>(SEARCH, [
      p.tenantId,
      p.query,
      p.propertyId ?? null,
      p.propertyId === null,
      p.kinds,
      p.vector?.model ?? null,
      p.vector?.sketch ?? '0',
      p.vector?.swapped ?? '0',
      p.vector?.nonZero ?? 0,
      p.weights.keyword,
      p.vector ? p.weights.vector : 0,
      p.limit,
      p.knownLarge,
    ]);
    return rows.map((row) => ({ ...row, score: Number(row.score) }));
  },
};
