-- Step 3 of the Idempotency-Key protocol (idempotency_claim) for several keys at once: the answers of uses that
-- ran, stored for replay until their expiry, in one statement. Their claims found no unexpired use and hold the
-- keys' locks, so an expired use is replaced. The keys must differ (conversation_replies stores a key used twice
-- in a group once).
-- PL/pgSQL, as the protocol's other functions: its statement's plan is kept per connection (a SQL function's body is
-- planned again on every call).
CREATE OR REPLACE FUNCTION idempotency_stores(p_tenant_ids text[], p_operations text[], p_keys text[], p_request_hashes text[], p_statuses integer[],
                                              p_bodies jsonb[], p_ats timestamptz[], p_expires_ats timestamptz[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO idempotency_keys AS i (tenant_id, operation, key, request_hash, response_status, response_body, created_at, expires_at)
  SELECT * FROM unnest(p_tenant_ids, p_operations, p_keys, p_request_hashes, p_statuses, p_bodies, p_ats, p_expires_ats)
  ON CONFLICT (tenant_id, operation, key) DO UPDATE SET request_hash = excluded.request_hash, response_status = excluded.response_status,
    response_body = excluded.response_body, created_at = excluded.created_at, expires_at = excluded.expires_at;
END
$$;
