-- A guest's question as the full-text query of one candidate level of the knowledge search
-- (src/knowledge/search/search-repo.ts): its words as english and as spanish lexemes (each language's stop words
-- dropped, the rest stemmed), each quoted so that it is taken as it is, never parsed as an operator.
--   every: the chunks holding every word in one of the languages;
--   any:   any word.
-- NULL when either language leaves no word (only stop words, punctuation, emoji): such a question finds nothing.
-- IMMUTABLE: the same question always gives the same query.
CREATE OR REPLACE FUNCTION knowledge_search_query(question text, mode text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  WITH lexemes AS (
    SELECT 'english' AS cfg, lexeme FROM unnest(tsvector_to_array(to_tsvector('english', question))) AS lexeme
    UNION ALL
    SELECT 'spanish', lexeme FROM unnest(tsvector_to_array(to_tsvector('spanish', question))) AS lexeme
  ), quoted AS (
    SELECT DISTINCT cfg, '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''' AS term
    FROM lexemes
    WHERE (SELECT count(DISTINCT cfg) FROM lexemes) = 2
  )
  SELECT (CASE mode
    WHEN 'any' THEN (SELECT string_agg(DISTINCT term, ' | ') FROM quoted)
    WHEN 'every' THEN (SELECT string_agg('(' || words || ')', ' | ') FROM (SELECT string_agg(term, ' & ') AS words FROM quoted GROUP BY cfg) AS per_language)
  END)::tsquery
$$;
