-- The outcome writer's batch (src/webhooks/dispatch-repo.ts), in one call: the
-- subscriptions of the batch are locked in id order first (a PATCH or delete locks the subscription and then
-- its deliveries: the same order, so the two never deadlock); the deliveries this worker still leases take their
-- outcome and every attempt is logged; the applied outcomes fold into each subscription's health (a success
-- resets the streak, failures after the last success extend it and the first of them starts the auto-disable
-- clock). Returns the active subscriptions of the batch that have now failed every attempt for
-- p_disable_after_ms, at least p_min_failures times: the caller disables them (webhook_disable_failing).
CREATE OR REPLACE FUNCTION webhook_record_outcomes(p_worker text, p_ids text[], p_tenants text[], p_subscriptions text[], p_status text[],
                                        p_next_attempt_at timestamptz[], p_http_status integer[], p_failure_code text[],
                                        p_finished_at timestamptz[], p_started_at timestamptz[], p_duration_ms integer[], p_error text[],
                                        p_disable_after_ms bigint, p_min_failures integer)
RETURNS TABLE (failing_id text)
LANGUAGE plpgsql AS $$
DECLARE
  applied text[];
  any_failure boolean;
BEGIN
  PERFORM 1 FROM webhook_subscriptions s WHERE s.id = ANY (p_subscriptions) ORDER BY s.id FOR NO KEY UPDATE;

  WITH input AS (
    SELECT * FROM unnest(p_ids, p_tenants, p_status, p_next_attempt_at, p_http_status, p_failure_code, p_finished_at, p_started_at, p_duration_ms, p_error)
      AS t(id, tenant_id, status, next_attempt_at, http_status, failure_code, finished_at, started_at, duration_ms, error)
  ), updated AS (
    UPDATE webhook_deliveries d SET
      status = i.status, attempts = d.attempts + 1, cycle_attempts = d.cycle_attempts + 1,
      next_attempt_at = i.next_attempt_at, http_status = i.http_status, failure_code = i.failure_code,
      delivered_at = CASE WHEN i.status = 'delivered' THEN i.finished_at ELSE d.delivered_at END,
      completed_at = CASE WHEN i.status = 'pending' THEN NULL ELSE i.finished_at END,
      locked_by = NULL, locked_until = NULL, updated_at = i.finished_at
    FROM input i
    WHERE d.id = i.id AND d.tenant_id = i.tenant_id AND d.locked_by = p_worker AND d.status = 'pending'
    RETURNING d.id
  ), logged AS (
    INSERT INTO webhook_attempts (delivery_id, tenant_id, attempted_at, duration_ms, http_status, failure_code, error)
    SELECT i.id, i.tenant_id, i.started_at, i.duration_ms, i.http_status, i.failure_code, i.error FROM input i)
  SELECT array_agg(u.id) INTO applied FROM updated u;
  IF applied IS NULL THEN
    RETURN;
  END IF;

  WITH o AS (
    SELECT t.subscription_id, t.finished_at, t.failure_code
    FROM unnest(p_ids, p_subscriptions, p_finished_at, p_failure_code) AS t(id, subscription_id, finished_at, failure_code)
    WHERE t.id = ANY (applied)
  ), per_sub AS (
    SELECT o.subscription_id,
           max(o.finished_at) FILTER (WHERE o.failure_code IS NULL) AS last_success,
           max(o.finished_at) FILTER (WHERE o.failure_code IS NOT NULL) AS last_failure,
           (array_agg(o.failure_code ORDER BY o.finished_at DESC) FILTER (WHERE o.failure_code IS NOT NULL))[1] AS last_code
    FROM o GROUP BY o.subscription_id
  ), streak AS (
    SELECT p.subscription_id, p.last_success, p.last_failure, p.last_code,
           count(*) FILTER (WHERE o.failure_code IS NOT NULL AND (p.last_success IS NULL OR o.finished_at > p.last_success))::int AS failures,
           min(o.finished_at) FILTER (WHERE o.failure_code IS NOT NULL AND (p.last_success IS NULL OR o.finished_at > p.last_success)) AS first_failure
    FROM per_sub p JOIN o ON o.subscription_id = p.subscription_id
    GROUP BY p.subscription_id, p.last_success, p.last_failure, p.last_code)
  UPDATE webhook_subscriptions s SET
    consecutive_failures = CASE WHEN st.last_success IS NULL THEN s.consecutive_failures ELSE 0 END + st.failures,
    failing_since = CASE WHEN st.last_success IS NULL THEN COALESCE(s.failing_since, st.first_failure) ELSE st.first_failure END,
    last_success_at = GREATEST(s.last_success_at, st.last_success),
    last_failure_at = GREATEST(s.last_failure_at, st.last_failure),
    last_failure_code = CASE WHEN st.last_failure IS NULL THEN s.last_failure_code ELSE st.last_code END
  FROM streak st WHERE s.id = st.subscription_id;

  SELECT bool_or(t.failure_code IS NOT NULL) INTO any_failure FROM unnest(p_ids, p_failure_code) AS t(id, failure_code) WHERE t.id = ANY (applied);
  IF NOT any_failure THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT s.id FROM webhook_subscriptions s
  WHERE s.id = ANY (p_subscriptions) AND s.active AND s.deleted_at IS NULL AND s.consecutive_failures >= p_min_failures
    AND s.failing_since <= s.last_failure_at - make_interval(secs => p_disable_after_ms / 1000.0);
END
$$;
