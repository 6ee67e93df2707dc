-- A guest's question as the full-text query of one candidate level of the knowledge search
-- (src/knowledge/search/search-repo.ts): its words as english and as spanish lexemes (each language's stop words
-- dropped, the rest stemmed), each quoted so that it is taken as it is, never parsed as an operator.
--   every: the chunks holding every word in one of the languages;
--   most:  every word but one (a question of 3 up to most_up_to words in a language; otherwise any of its words);
--   any:   any word.
-- NULL when either language leaves no word (only stop words, punctuation, emoji): such a question finds nothing.
-- IMMUTABLE, so that with the question bound the planner computes the query before planning and estimates how
-- many chunks it matches from the full-text index's statistics, as it does for websearch_to_tsquery.
CREATE OR REPLACE FUNCTION knowledge_search_query(question text, mode text, most_up_to int) RETURNS tsquery
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
  ), sizes AS (
    SELECT cfg, count(*) AS words FROM quoted GROUP BY cfg
  )
  SELECT (CASE mode
    WHEN 'any' THEN (SELECT string_agg(DISTINCT term, ' | ') FROM quoted)
    WHEN 'every' THEN (SELECT string_agg('(' || words || ')', ' | ') FROM (SELECT string_agg(term, ' & ') AS words FROM quoted GROUP BY cfg) AS per_language)
    ELSE (SELECT string_agg('(' || alternative || ')', ' | ') FROM (
      SELECT CASE WHEN s.words BETWEEN 3 AND most_up_to
               THEN (SELECT string_agg(o.term, ' & ') FROM quoted o WHERE o.cfg = t.cfg AND o.term <> t.term)
               ELSE t.term END AS alternative
      FROM quoted t JOIN sizes s ON s.cfg = t.cfg) AS alternatives)
  END)::tsquery
$$;
