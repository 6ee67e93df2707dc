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
