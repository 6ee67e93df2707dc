-- Step 3 of the Idempotency-Key protocol (idempotency_claim): the answer of a use that ran, stored for replay
-- until p_expires_at. Its claim found no unexpired use and holds the key's lock, so an expired one is replaced.
CREATE OR REPLACE FUNCTION idempotency_store(p_tenant_id text, p_operation text, p_key text, p_request_hash text, p_status integer,
                                             p_body jsonb, p_at timestamptz, p_expires_at timestamptz)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO idempotency_keys AS i (tenant_id, operation, key, request_hash, response_status, response_body, created_at, expires_at)
  VALUES (p_tenant_id, p_operation, p_key, p_request_hash, p_status, p_body, p_at, p_expires_at)
  ON CONFLICT (tenant_id, operation, key) DO UPDATE SET request_hash = excluded.request_hash, response_status = excluded.response_status,
    response_body = excluded.response_body, created_at = excluded.created_at, expires_at = excluded.expires_at
$$;
