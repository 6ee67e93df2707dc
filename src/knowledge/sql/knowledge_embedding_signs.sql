-- One half of a chunk vector's sign sketch: a bit per dimension, set where the component is positive
-- (positive = true) or negative (positive = false); zero components set neither. Two sketches compare with
-- bit_count over AND (see src/knowledge/search/search-repo.ts): a native operation on a few dozen bytes, where a
-- per-component product of two real[] arrays in SQL costs a row per component. IMMUTABLE so that a generated
-- column may call it.
CREATE OR REPLACE FUNCTION knowledge_embedding_signs(embedding real[], positive boolean) RETURNS varbit
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT string_agg(CASE WHEN (positive AND v > 0) OR (NOT positive AND v < 0) THEN '1' ELSE '0' END, '' ORDER BY i)::varbit
  FROM unnest(embedding) WITH ORDINALITY AS u (v, i)
$$;
