-- A timestamp as the API writes it (util/time.ts iso()): UTC, milliseconds (further digits dropped, as iso() drops
-- them), then "Z". The zone is fixed and the pattern has no locale-dependent field, so the text depends on the
-- argument alone: IMMUTABLE, which a generated column's expression requires.
CREATE OR REPLACE FUNCTION iso_millis(at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;
