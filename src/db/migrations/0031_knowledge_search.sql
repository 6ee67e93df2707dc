-- Searching the knowledge (issue 44, decisions 7.5): each chunk gets its words as a tsvector in the language its
-- text is written in, and a sign sketch of its vector, both generated from the chunk so that every writer
-- (ingestion, crawls, copies of unchanged pages) fills them and existing chunks are filled here.
-- The two functions are also kept one per file in src/knowledge/sql/ (the repeatable definitions).

-- The text search configuration a chunk's words are indexed with: english or spanish when that language's
-- commonest words make up a clear share of the text, else simple (every word as written, no stemming, no stop
-- words). A stop-word count is enough to tell the two languages apart on a paragraph and needs no dictionary;
-- the first 4000 characters decide. IMMUTABLE (the word lists are constants) so that a generated column may
-- call it.
CREATE OR REPLACE FUNCTION knowledge_text_config(body text) RETURNS regconfig
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  WITH words AS (
    SELECT w FROM regexp_split_to_table(lower(left(body, 4000)), '[^[:alpha:]]+') AS w WHERE w <> ''
  ), counts AS (
    SELECT
      count(*) FILTER (WHERE w = ANY (ARRAY['the', 'and', 'is', 'are', 'of', 'to', 'in', 'for', 'with', 'you', 'your', 'our',
        'we', 'on', 'at', 'from', 'or', 'be', 'can', 'will', 'this', 'that', 'it', 'as', 'by', 'an', 'have', 'has', 'not', 'all'])) AS english,
      count(*) FILTER (WHERE w = ANY (ARRAY['el', 'la', 'los', 'las', 'de', 'del', 'y', 'que', 'en', 'un', 'una', 'por', 'para',
        'con', 'es', 'son', 'se', 'su', 'sus', 'al', 'lo', 'como', 'nuestro', 'nuestra', 'puede', 'pueden', 'desde', 'hasta', 'muy', 'también'])) AS spanish,
      count(*) AS total
    FROM words
  )
  SELECT CASE
    WHEN total = 0 THEN 'simple'::regconfig
    WHEN english >= spanish AND english * 12 >= total THEN 'english'::regconfig
    WHEN spanish > english AND spanish * 12 >= total THEN 'spanish'::regconfig
    ELSE 'simple'::regconfig
  END
  FROM counts
$$;

-- A chunk vector's ternary sign sketch: one bit per dimension set where the component is positive, followed by
-- one bit per dimension set where it is negative (zero components set neither). Two sketches compare with
-- bit_count over AND (see src/knowledge/search/search-repo.ts): a native operation on a few dozen bytes, where a
-- per-component product of two real[] arrays in SQL costs a row per component. IMMUTABLE so that a generated
-- column may call it.
CREATE OR REPLACE FUNCTION knowledge_embedding_signs(embedding real[]) RETURNS varbit
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT (string_agg(CASE WHEN v > 0 THEN '1' ELSE '0' END, '' ORDER BY i) || string_agg(CASE WHEN v < 0 THEN '1' ELSE '0' END, '' ORDER BY i))::varbit
  FROM unnest(embedding) WITH ORDINALITY AS u (v, i)
$$;

ALTER TABLE knowledge_chunks
  ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (to_tsvector(knowledge_text_config(text), text)) STORED,
  ADD COLUMN embedding_signs varbit GENERATED ALWAYS AS (knowledge_embedding_signs(embedding)) STORED;

CREATE INDEX knowledge_chunks_search ON knowledge_chunks USING gin (search_vector);
-- A tenant's chunks without the source table: the search's vector side scores all of them when they are few.
CREATE INDEX knowledge_chunks_tenant ON knowledge_chunks (tenant_id, source_id, seq);
