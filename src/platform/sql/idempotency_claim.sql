-- The Idempotency-Key protocol (decisions 3), the one way every create, start, send and reply takes its key, from
-- a TypeScript transaction (src/platform/idempotency.ts runIdempotent) or inside conversation_replies:
--   1. idempotency_claim: the key's transaction-scoped advisory lock, then its unexpired earlier use, if any
--      (idempotency_claims does it, for one key here, for a group's keys in conversation_replies);
--   2. the caller's writes, in the same transaction;
--   3. idempotency_store: the answer, under the key, committed with the writes.
-- The lock is held until the transaction ends, so a use still running is never run twice and a crash or a
-- refusal leaves nothing behind (the rollback releases the lock and nothing was stored). With p_wait a caller
-- waits for a use still running and then gets its answer (replies: one short statement); without it the
-- outcome is `running` (409 while the first is still running).
-- Outcomes: free (run, then store), taken (the stored answer: replay it, or 409 for another request), running.
-- Two keys sharing a 64-bit hash only ever wait for each other or see a spurious `running`.
CREATE OR REPLACE FUNCTION idempotency_claim(p_tenant_id text, p_operation text, p_key text, p_at timestamptz, p_wait boolean,
                                             OUT outcome text, OUT stored_hash text, OUT stored_status integer, OUT stored_body jsonb)
LANGUAGE plpgsql AS $$
BEGIN
  SELECT c.outcome, c.stored_hash, c.stored_status, c.stored_body INTO outcome, stored_hash, stored_status, stored_body
  FROM idempotency_claims(ARRAY[p_tenant_id], ARRAY[p_operation], ARRAY[p_key], ARRAY[p_at], p_wait) c;
END
$$;
