-- Step 3 of the Idempotency-Key protocol (idempotency_claim): the answer of a use that ran, stored for replay
-- until p_expires_at (idempotency_stores does it, for one key here).
CREATE OR REPLACE FUNCTION idempotency_store(p_tenant_id text, p_operation text, p_key text, p_request_hash text, p_status integer,
                                             p_body jsonb, p_at timestamptz, p_expires_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM idempotency_stores(ARRAY[p_tenant_id], ARRAY[p_operation], ARRAY[p_key], ARRAY[p_request_hash], ARRAY[p_status], ARRAY[p_body],
                            ARRAY[p_at], ARRAY[p_expires_at]);
END
$$;
