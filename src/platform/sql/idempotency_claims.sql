-- Step 1 of the Idempotency-Key protocol (idempotency_claim) for several keys at once, as conversation_replies
-- claims a group's keys: each key's transaction-scoped advisory lock, taken in key order (so that callers holding
-- several keys never deadlock on them), then the unexpired earlier use of each, read in one statement. With p_wait a
-- key held by a use still running is waited for; without it that key's outcome is `running`. The same key twice
-- is locked twice by one transaction, which is no wait. One row per key, `ordinal` its 1-based position.
CREATE OR REPLACE FUNCTION idempotency_claims(p_tenant_ids text[], p_operations text[], p_keys text[], p_ats timestamptz[], p_wait boolean)
RETURNS TABLE (ordinal integer, outcome text, stored_hash text, stored_status integer, stored_body jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  k record;
  running integer[] := '{}';
BEGIN
  FOR k IN SELECT u.n::integer AS n, hashtextextended(u.t || '|' || u.o || '|' || u.k, 0) AS lock_id
           FROM unnest(p_tenant_ids, p_operations, p_keys) WITH ORDINALITY AS u(t, o, k, n) ORDER BY u.t, u.o, u.k, u.n LOOP
    IF p_wait THEN
      PERFORM pg_advisory_xact_lock(k.lock_id);
    ELSIF NOT pg_try_advisory_xact_lock(k.lock_id) THEN
      running := running || k.n;
    END IF;
  END LOOP;
  RETURN QUERY
  SELECT u.n::integer, CASE WHEN u.n::integer = ANY (running) THEN 'running' WHEN i.key IS NULL THEN 'free' ELSE 'taken' END,
         i.request_hash, i.response_status, i.response_body
  FROM unnest(p_tenant_ids, p_operations, p_keys, p_ats) WITH ORDINALITY AS u(t, o, k, at, n)
  LEFT JOIN idempotency_keys i ON NOT (u.n::integer = ANY (running)) AND i.tenant_id = u.t AND i.operation = u.o AND i.key = u.k AND i.expires_at > u.at
  ORDER BY u.n;
END
$$;
