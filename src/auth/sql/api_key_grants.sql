-- Fan-out eligibility: an API key is in force at p_at and holds at least one of p_granting. Who may receive an
-- event (a webhook delivery) is decided here only; which scopes grant an event's read scope (the scope itself or
-- its write scope) is decided in TypeScript (src/auth/scopes.ts grantingScopes), which passes them in.
-- A plain SQL expression, so the planner inlines it into the statements that call it (no call per row).
CREATE OR REPLACE FUNCTION api_key_grants(p_revoked_at timestamptz, p_expires_at timestamptz, p_scopes text[], p_at timestamptz, p_granting text[])
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT api_key_in_force(p_revoked_at, p_expires_at, p_at) AND p_scopes && p_granting $$;
