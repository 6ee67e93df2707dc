import type { Queryable } from '../../db/driver.js';
import type { SourceKind } from '../repo.js';

/** How many passages each side ranks before fusion. */
export const SIDE_DEPTH = 50;
/**
 * Up to this many chunks in the tenant, the vector side scores every visible chunk; past it, only the keyword
 * side's passages (it re-ranks them). A hotel's knowledge is a few hundred chunks; a scan of a large tenant's
 * chunks on every question is what the keyword side's index is there to avoid.
 */
export const VECTOR_SCAN_LIMIT = 2000;
/**
 * The vector side's passages by sketch estimate whose exact cosine is computed (a product of two real[] in SQL
 * is a row per component, so it is kept to these).
 */
export const RESCORED = 20;
/**
 * At most this many chunks holding any word of the question are ranked (in no particular order beyond that):
 * on a large knowledge base a common word is in tens of thousands of chunks, and ranking them all is the cost
 * of a search. A knowledge base of a few thousand chunks is ranked whole.
 */
export const ANY_WORD_LIMIT = 500;
/**
 * The chunks holding every word of the question are the keyword side's candidates when there are at least this
 * many; fewer, and the chunks holding any of its words are. A constant, so that the ranking of the first results
 * does not depend on how many the caller asked for.
 */
export const STRICT_ENOUGH = 5;

export interface SearchParams {
  tenantId: string;
  query: string;
  /** undefined: every property and global knowledge; null: global knowledge only; an id: that property's and global. */
  propertyId: string | null | undefined;
  kinds: readonly SourceKind[];
  /** The query's vector sketch, of the embedder whose chunks it is compared with; absent: no vector side. */
  vector?: { model: string; sketch: string; swapped: string; nonZero: number; values: readonly number[] };
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
}

/**
 * Which chunks a question may find, joined on `c` (knowledge_chunks) and `s` (its source): active sources of
 * the kinds asked for, and a crawled page only while its website is active, its generation is the website's
 * current one and the selection rules leave it enabled. Read on every search, so deactivating or deleting a
 * source takes its chunks out of the very next answer. The scope of a page is its website's.
 * $1 tenant, $3 property id or null, $4 global only, $5 kinds.
 */
const VISIBLE = `
  JOIN knowledge_sources s ON s.id = c.source_id AND s.tenant_id = c.tenant_id
  LEFT JOIN knowledge_websites w ON w.id = s.website_id AND w.tenant_id = s.tenant_id
  LEFT JOIN knowledge_sources ws ON ws.id = w.source_id AND ws.tenant_id = w.tenant_id
  WHERE c.tenant_id = $1 AND s.active AND s.kind = ANY ($5::text[])
    AND (s.kind <> 'website_page' OR (s.enabled AND ws.active AND s.website_generation_id = w.current_generation_id))
    AND CASE WHEN $4::boolean THEN (CASE WHEN s.kind = 'website_page' THEN ws.property_id ELSE s.property_id END) IS NULL
             WHEN $3::text IS NULL THEN true
             ELSE coalesce(CASE WHEN s.kind = 'website_page' THEN ws.property_id ELSE s.property_id END, $3::text) = $3::text END`;

/**
 * Hybrid search in one statement, the same on PostgreSQL and PGlite.
 * Keyword side: the question's words as english and as spanish lexemes (to_tsvector drops each language's
 * stop words and stems the rest). Candidates, level by level until one has STRICT_ENOUGH: the chunks holding
 * every word of the question in one of the languages; else the chunks holding any of its words, at most
 * ANY_WORD_LIMIT of them (a guest
 * writes a sentence, not a list of words every passage must hold); see the q CTE for how each level's query is
 * written. The best candidates are ranked again by a BM25-like
 * sum over the question's lexemes of idf × ts_rank, the idf taken among those candidates, so that a rare word
 * of the question ("sauna") outweighs a common one ("time"). A question with no lexeme left in english or none
 * in spanish (only stop words of either, punctuation, emoji) finds nothing on either side.
 * Vector side: chunks with a stored vector of the question's model, estimated by the cosine of their ternary
 * sign sketches (bits where components are positive, bits where they are negative), the best of them scored by
 * their exact cosine.
 * Fusion: keyword weight × coverage × keyword score over the best keyword score + vector weight × cosine (both
 * sides' strength counts, not only their order: a weak side moves little). Coverage is the share of the question's
 * idf weight (in whichever of the two languages the passage covers better) that the passage holds: it makes the
 * score absolute, so that a passage sharing only one common word with a question that is about something else
 * ("a good dentist nearby" → a page saying "nearby") scores low instead of 1 for being the best of a bad lot.
 * Reciprocal-rank fusion was measured and left out: it gives a weak side's order as much say as a strong
 * side's (decisions in the helper's notes; bench/search.ts).
 * $2 query, $6 model, $7 the question's sketch, $8 its halves swapped, $9 its non-zero count, $10 keyword weight,
 * $11 vector weight, $12 limit, $13 query vector.
 * The code's constants (SIDE_DEPTH, VECTOR_SCAN_LIMIT, RESCORED, ANY_WORD_LIMIT, STRICT_ENOUGH) are literals of the
 * text, not parameters: the named statement's generic plan is then estimated with the same bounds as a custom one
 * (a LIMIT of an unknown parameter is estimated as a tenth of the rows), so PostgreSQL keeps it instead of
 * planning this statement again on every search.
 */
const SEARCH = `
WITH lexemes AS (
  SELECT 'english' AS cfg, lexeme FROM unnest(tsvector_to_array(to_tsvector('english', $2))) AS lexeme
  UNION ALL
  SELECT 'spanish', lexeme FROM unnest(tsvector_to_array(to_tsvector('spanish', $2))) AS lexeme
),
terms AS (
  -- Each lexeme as a one-word tsquery: quoted, so that it is taken as it is, never parsed as an operator.
  SELECT DISTINCT ('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''')::tsquery AS tsq
  FROM lexemes
  WHERE (SELECT count(DISTINCT cfg) FROM lexemes) = 2
),
language_terms AS (
  SELECT DISTINCT l.cfg, ('''' || replace(replace(l.lexeme, '\\', '\\\\'), '''', '''''') || '''')::tsquery AS tsq
  FROM lexemes l WHERE EXISTS (SELECT 1 FROM terms)
),
q AS (
  -- Each level's query once per search, for ranking. The WHERE clauses build the same query from built-in
  -- IMMUTABLE functions of $2 (plainto_tsquery takes every word as a plain word, never as an operator): with the
  -- question bound, the planner computes it and estimates its matches from the GIN statistics, so it scans the
  -- full-text index alone instead of ANDing it with a bitmap of every chunk of the tenant; under a generic plan
  -- of a named statement, computing it again per row costs microseconds. Not a call of knowledge_search_query
  -- (a SQL function: per row, milliseconds) nor a column of q (the planner cannot estimate it).
  SELECT EXISTS (SELECT 1 FROM terms) AS meaningful,
         knowledge_search_query($2, 'every') AS every_word,
         knowledge_search_query($2, 'any') AS any_word
),
few AS (
  -- In the tenant index's order, so that the count stops at the limit whatever the tenant's size.
  SELECT count(*) <= ${VECTOR_SCAN_LIMIT} AS yes
  FROM (SELECT 1 FROM knowledge_chunks WHERE tenant_id = $1 ORDER BY tenant_id, source_id, seq LIMIT ${VECTOR_SCAN_LIMIT} + 1) AS x
),
strict AS (
  SELECT c.source_id, c.seq, c.search_vector
  FROM q CROSS JOIN knowledge_chunks c ${VISIBLE}
    AND q.meaningful AND c.search_vector @@ (plainto_tsquery('english', $2::text) || plainto_tsquery('spanish', $2::text))
  ORDER BY ts_rank(c.search_vector, q.every_word) DESC, c.source_id, c.seq
  LIMIT 2 * ${SIDE_DEPTH}
),
matched AS (
  SELECT * FROM strict WHERE (SELECT count(*) FROM strict) >= ${STRICT_ENOUGH}
  UNION ALL
  (SELECT m.source_id, m.seq, m.search_vector
   FROM (
     SELECT c.source_id, c.seq, c.search_vector
     FROM q CROSS JOIN knowledge_chunks c ${VISIBLE}
       AND q.meaningful AND c.search_vector @@ replace((plainto_tsquery('english', $2::text) || plainto_tsquery('spanish', $2::text))::text, ' & ', ' | ')::tsquery AND (SELECT count(*) FROM strict) < ${STRICT_ENOUGH}
     LIMIT ${ANY_WORD_LIMIT}
   ) AS m CROSS JOIN q
   ORDER BY ts_rank(m.search_vector, q.any_word) DESC, m.source_id, m.seq
   LIMIT 2 * ${SIDE_DEPTH})
),
candidates AS (
  -- Each candidate's words once in memory: a stored tsvector is kept compressed, and the ranking below tests every
  -- candidate against every lexeme of the question (rarity, keyword, covered), which would decompress it each
  -- time. setweight to D is the identity here (to_tsvector gives every position weight D); it returns the vector
  -- as a new, uncompressed value.
  SELECT source_id, seq, setweight(search_vector, 'D') AS search_vector FROM matched
),
rarity AS (
  SELECT t.tsq, ln(1 + ((SELECT count(*) FROM candidates) - count(c.seq) + 0.5) / (count(c.seq) + 0.5)) AS idf
  FROM terms t LEFT JOIN candidates c ON c.search_vector @@ t.tsq
  GROUP BY t.tsq
),
keyword AS (
  SELECT c.source_id, c.seq, sum(r.idf * ts_rank(c.search_vector, r.tsq)) AS score
  FROM candidates c JOIN rarity r ON c.search_vector @@ r.tsq
  GROUP BY c.source_id, c.seq
  ORDER BY score DESC, c.source_id, c.seq
  LIMIT ${SIDE_DEPTH}
),
totals AS (
  SELECT t.cfg, sum(r.idf) AS total FROM language_terms t JOIN rarity r ON r.tsq = t.tsq GROUP BY t.cfg
),
covered AS (
  SELECT k.source_id, k.seq, k.score, coalesce(max(x.matched / nullif(tot.total, 0)), 0) AS coverage
  FROM keyword k
  JOIN candidates c ON c.source_id = k.source_id AND c.seq = k.seq
  CROSS JOIN LATERAL (
    SELECT t.cfg, sum(r.idf) AS matched FROM language_terms t JOIN rarity r ON r.tsq = t.tsq
    WHERE c.search_vector @@ t.tsq GROUP BY t.cfg
  ) AS x
  JOIN totals tot ON tot.cfg = x.cfg
  GROUP BY k.source_id, k.seq, k.score
),
pool AS (
  -- A few chunks: all of them, read as the first VECTOR_SCAN_LIMIT of the tenant's (which are all there are). Bounded so in the
  -- statement itself: a plan's estimate counts this branch even when the tenant is large and it never runs, and an
  -- estimate as large as a scan of every chunk of a large tenant makes PostgreSQL compile the whole statement (JIT)
  -- on every search.
  SELECT c.source_id, c.seq, c.embedding_signs AS signs
  FROM (SELECT * FROM knowledge_chunks WHERE tenant_id = $1 AND (SELECT yes FROM few) AND (SELECT meaningful FROM q)
        ORDER BY tenant_id, source_id, seq LIMIT ${VECTOR_SCAN_LIMIT}) AS c ${VISIBLE}
    AND c.embedding_model = $6::text
  UNION ALL
  SELECT c.source_id, c.seq, c.embedding_signs
  FROM keyword k JOIN knowledge_chunks c ON c.source_id = k.source_id AND c.seq = k.seq
  WHERE NOT (SELECT yes FROM few) AND c.embedding_model = $6::text
),
sketched AS (
  SELECT source_id, seq
  FROM (
    SELECT source_id, seq,
      CASE WHEN length(signs) = length($7::varbit)
        THEN (bit_count(signs & $7::varbit) - bit_count(signs & $8::varbit))::float8 / sqrt(greatest(1, bit_count(signs)) * greatest(1, $9::int))
      END AS estimate
    FROM pool
  ) AS scored
  WHERE estimate > 0
  ORDER BY estimate DESC, source_id, seq
  LIMIT ${RESCORED}
),
vector AS (
  SELECT c.source_id, c.seq,
    (SELECT sum(a * b) / nullif(sqrt(sum(a * a) * sum(b * b)), 0) FROM unnest(c.embedding, $13::real[]) AS u (a, b)) AS sim
  FROM sketched k JOIN knowledge_chunks c ON c.source_id = k.source_id AND c.seq = k.seq
),
fused AS (
  SELECT source_id, seq, sum(part) AS score
  FROM (
    SELECT source_id, seq, $10::float8 * coverage * score / (SELECT max(score) FROM keyword) AS part FROM covered
    UNION ALL
    SELECT source_id, seq, $11::float8 * sim FROM vector WHERE sim > 0
  ) AS sides
  GROUP BY source_id, seq
  HAVING sum(part) > 0
  ORDER BY score DESC, source_id, seq
  LIMIT $12
)
SELECT f.score, s.id AS source_id, s.kind, s.website_id, s.title, coalesce(s.canonical_url, s.url) AS url, c.text, s.updated_at
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
      p.vector ? `{${p.vector.values.join(',')}}` : '{}',
    ]);
    return rows.map((row) => ({ ...row, score: Number(row.score) }));
  },
};
