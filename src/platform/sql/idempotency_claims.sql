-- Step 1 of the Idempotency-Key protocol (idempotency_claim) for several keys at once, as conversation_replies
-- claims a group's keys: each key's transaction-scoped advisory lock, taken in key order (so that callers holding
-- several keys never deadlock on them), then the unexpired earlier use of each, read in one statement. With p_wait a
-- key held by a use still running is waited for; without it that key's outcome is `running`. The same key twice
-- is locked twice by one transaction, which is no wait. One row per key, `ordinal` its 1-based position.
-- The locks are taken by one statement: the ordered subquery is evaluated in its order before the lock of each row.
CREATE OR REPLACE FUNCTION idempotency_claims(p_tenant_ids text[], p_operations text[], p_keys text[], p_ats timestamptz[], p_wait boolean)
RETURNS TABLE (ordinal integer, outcome text, stored_hash text, stored_status integer, stored_body jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  running integer[];
BEGIN
  SELECT COALESCE(array_agg(l.n) FILTER (WHERE NOT l.locked), '{}') INTO running
  FROM (SELECT o.n, CASE WHEN p_wait THEN pg_advisory_xact_lock(o.lock_id) IS NOT NULL ELSE pg_try_advisory_xact_lock(o.lock_id) END AS locked
        FROM (SELECT u.n::integer AS n, hashtextextended(u.t || '|' || u.o || '|' || u.k, 0) AS lock_id
              FROM unnest(p_tenant_ids, p_operations, p_keys) WITH ORDINALITY AS u(t, o, k, n)
              ORDER BY u.t, u.o, u.k, u.n OFFSET 0) o) l;
  -- Each key is looked up on its own (a lateral subquery kept apart by OFFSET 0): the plan of this statement is kept
  -- per connection, and one made while the table was small would otherwise hash the whole table on every call.
  RETURN QUERY
  SELECT u.n::integer, CASE WHEN u.n::integer = ANY (running) THEN 'running' WHEN i.key IS NULL THEN 'free' ELSE 'taken' END,
         i.request_hash, i.response_status, i.response_body
  FROM unnest(p_tenant_ids, p_operations, p_keys, p_ats) WITH ORDINALITY AS u(t, o, k, at, n)
  LEFT JOIN LATERAL (SELECT i.key, i.request_hash, i.response_status, i.response_body FROM idempotency_keys i
                     WHERE i.tenant_id = u.t AND i.operation = u.o AND i.key = u.k AND i.expires_at > u.at OFFSET 0) i
    ON NOT (u.n::integer = ANY (running))
  ORDER BY u.n;
END
$$;
