import type { Queryable } from '../../db/driver.js';
import type { SourceKind } from '../repo.js';

/** Reciprocal-rank fusion's constant: a passage's share from one ranking is weight / (RRF_K + its rank there). */
export const RRF_K = 60;
/** How many passages each side ranks before fusion. */
export const SIDE_DEPTH = 100;
/**
 * Up to this many chunks in the tenant, the vector side scores every visible chunk; past it, only the keyword
 * side's passages (it re-ranks them). A hotel's knowledge is a few hundred chunks; a scan of a large tenant's
 * chunks on every question is what the keyword side's index is there to avoid.
 */
export const VECTOR_SCAN_LIMIT = 2000;

export interface SearchParams {
  tenantId: string;
  query: string;
  /** undefined: every property and global knowledge; null: global knowledge only; an id: that property's and global. */
  propertyId: string | null | undefined;
  kinds: readonly SourceKind[];
  /** The query's vector sketch, of the embedder whose chunks it is compared with; absent: no vector side. */
  vector?: { model: string; positive: string; negative: string; nonZero: number };
  weights: { keyword: number; vector: number };
  limit: number;
}

export interface SearchRow {
  rrf: number;
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
 * Keyword side: the question parsed by websearch_to_tsquery in english, spanish and simple, its terms joined
 * by OR (a guest writes a sentence, not a list of words every passage must hold), ranked by ts_rank_cd over
 * the GIN-indexed tsvector. A question with no word left in english or none in spanish (only stop words of
 * either, punctuation, emoji) finds nothing on either side.
 * Vector side: the cosine of the ternary sign sketches (bits where components are positive, bits where they
 * are negative) of the question's vector and each chunk's stored vector of the same model.
 * Fusion: reciprocal rank, sum over the sides of weight / (60 + rank).
 * $2 query, $6 model, $7 positive bits, $8 negative bits, $9 query non-zero count, $10 keyword weight,
 * $11 vector weight, $12 limit, $13 side depth, $14 vector scan limit.
 */
const SEARCH = `
WITH q AS (
  SELECT replace((websearch_to_tsquery('english', $2) || websearch_to_tsquery('spanish', $2) || websearch_to_tsquery('simple', $2))::text, ' & ', ' | ')::tsquery AS query,
         numnode(websearch_to_tsquery('english', $2)) > 0 AND numnode(websearch_to_tsquery('spanish', $2)) > 0 AS meaningful
),
keyword AS (
  SELECT c.source_id, c.seq, row_number() OVER (ORDER BY ts_rank_cd(c.search_vector, q.query) DESC, c.source_id, c.seq) AS r
  FROM q CROSS JOIN knowledge_chunks c ${VISIBLE}
    AND q.meaningful AND c.search_vector @@ q.query
  ORDER BY r
  LIMIT $13
),
few AS (
  SELECT count(*) <= $14 AS yes FROM (SELECT 1 FROM knowledge_chunks WHERE tenant_id = $1 LIMIT $14 + 1) AS x
),
pool AS (
  SELECT c.source_id, c.seq, c.embedding_positive AS p, c.embedding_negative AS n
  FROM knowledge_chunks c ${VISIBLE}
    AND (SELECT yes FROM few) AND (SELECT meaningful FROM q) AND c.embedding_model = $6::text
  UNION ALL
  SELECT c.source_id, c.seq, c.embedding_positive, c.embedding_negative
  FROM keyword k JOIN knowledge_chunks c ON c.source_id = k.source_id AND c.seq = k.seq
  WHERE NOT (SELECT yes FROM few) AND c.embedding_model = $6::text
),
vector AS (
  SELECT source_id, seq, row_number() OVER (ORDER BY sim DESC, source_id, seq) AS r
  FROM (
    SELECT source_id, seq,
      CASE WHEN length(p) = length($7::varbit) AND length(n) = length($8::varbit)
        THEN (bit_count(p & $7::varbit) + bit_count(n & $8::varbit) - bit_count(p & $8::varbit) - bit_count(n & $7::varbit))::float8
             / sqrt(greatest(1, bit_count(p | n)) * greatest(1, $9::int))
      END AS sim
    FROM pool
  ) AS scored
  WHERE sim > 0
  ORDER BY r
  LIMIT $13
),
fused AS (
  SELECT source_id, seq, sum(weight / (${RRF_K} + r)) AS rrf
  FROM (
    SELECT source_id, seq, r, $10::float8 AS weight FROM keyword
    UNION ALL
    SELECT source_id, seq, r, $11::float8 FROM vector
  ) AS sides
  GROUP BY source_id, seq
  HAVING sum(weight) > 0
  ORDER BY rrf DESC, source_id, seq
  LIMIT $12
)
SELECT f.rrf, s.id AS source_id, s.kind, s.website_id, s.title, coalesce(s.canonical_url, s.url) AS url, c.text, s.updated_at
FROM fused f
JOIN knowledge_chunks c ON c.source_id = f.source_id AND c.seq = f.seq
JOIN knowledge_sources s ON s.id = c.source_id
ORDER BY f.rrf DESC, f.source_id, f.seq`;

export const searchRepo = {
  async search(db: Queryable, p: SearchParams): Promise<SearchRow[]> {
    const rows = await db.query<SearchRow>(SEARCH, [
      p.tenantId,
      p.query,
      p.propertyId ?? null,
      p.propertyId === null,
      p.kinds,
      p.vector?.model ?? null,
      p.vector?.positive ?? '0',
      p.vector?.negative ?? '0',
      p.vector?.nonZero ?? 0,
      p.weights.keyword,
      p.vector ? p.weights.vector : 0,
      p.limit,
      SIDE_DEPTH,
      VECTOR_SCAN_LIMIT,
    ]);
    return rows.map((row) => ({ ...row, rrf: Number(row.rrf) }));
  },
};
