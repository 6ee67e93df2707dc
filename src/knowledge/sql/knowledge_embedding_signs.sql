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
