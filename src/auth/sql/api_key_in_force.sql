-- An API key is in force at p_at: not revoked and not expired. The one statement of that rule in SQL: every
-- statement that asks whether a key counts (api_key_grants, webhook_claim's key_ok) calls this.
-- A plain SQL expression, so the planner inlines it into the statements that call it (no call per row).
CREATE OR REPLACE FUNCTION api_key_in_force(p_revoked_at timestamptz, p_expires_at timestamptz, p_at timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_revoked_at IS NULL AND (p_expires_at IS NULL OR p_expires_at > p_at) $$;
