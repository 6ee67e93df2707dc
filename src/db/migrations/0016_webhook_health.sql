-- Endpoint health, auto-disable and throttling of webhook subscriptions (decisions 6.3).

ALTER TABLE webhook_subscriptions
  -- Attempts failed since the last success (or ever), and when the first of them failed: the auto-disable clock.
  ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
  ADD COLUMN failing_since timestamptz,
  ADD COLUMN last_success_at timestamptz,
  ADD COLUMN last_failure_at timestamptz,
  ADD COLUMN last_failure_code text,
  -- Why the service disabled it ('failing'); cleared when a client enables it again.
  ADD COLUMN disabled_reason text,
  ADD COLUMN rate_limit_per_second integer CHECK (rate_limit_per_second BETWEEN 1 AND 10000),
  -- Pacing of a rate-limited subscription, shared by every worker: nothing more may be sent before this.
  ADD COLUMN next_send_at timestamptz;

-- The claim goes per subscription (src/webhooks/dispatch-repo.ts): it skips through this index from one subscription
-- with pending deliveries to the next and takes each one's oldest due deliveries, so neither a long backlog nor
-- a throttled or full destination is ever scanned past. It replaces the global due index.
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (subscription_id, next_attempt_at) WHERE status = 'pending';

-- The claim of the webhook dispatcher (src/webhooks/dispatch-repo.ts), per subscription rather than over one
-- global queue: the subscriptions with pending deliveries are found by skipping through the pending index (one
-- probe each, at most p_subscriptions per claim, round robin after p_after), and each gives its oldest due
-- deliveries up to its host's room in this worker or, when rate-limited, a tenth of a second's worth of its
-- rate (at least one), its next_send_at moving on by the time those take. The cost is bounded by what is
-- claimed and the subscriptions visited, never by the backlog, and a full destination or a throttled
-- subscription holds up no other. Chosen rows are locked with SKIP LOCKED and re-checked, so two workers never
-- claim the same row; a throttled subscription is claimed by one worker at a time (its row lock).
--
-- A function so that its plan is kept per connection: planning this statement cost several times running it,
-- on PGlite (which has no prepared statements of its own here) on every claim. Always one row at least: with
-- a null id when nothing was claimed, for the round robin's position.
CREATE FUNCTION webhook_claim(p_worker text, p_now timestamptz, p_lease_until timestamptz, p_limit integer, p_subscriptions integer,
                              p_after text, p_hosts text[], p_room integer[], p_default_room integer)
RETURNS TABLE (id text, tenant_id text, event_id text, event_type text, subscription_id text, cycle_attempts integer, body text,
               url text, host text, active boolean, deleted boolean, secret_sealed text, key_ok boolean, key_scopes text[],
               paced_wake_at timestamptz, last_visited text, visited integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH RECURSIVE pending_subs(sid) AS (
    (SELECT d1.subscription_id FROM webhook_deliveries d1 WHERE d1.status = 'pending' AND d1.subscription_id > p_after
     ORDER BY d1.subscription_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d1.subscription_id FROM webhook_deliveries d1 WHERE d1.status = 'pending' AND d1.subscription_id > p.sid
            ORDER BY d1.subscription_id LIMIT 1)
    FROM pending_subs p WHERE p.sid IS NOT NULL
  ), visited_subs AS (
    SELECT sid FROM pending_subs WHERE sid IS NOT NULL LIMIT p_subscriptions
  ), rooms AS (
    SELECT r.h, r.n FROM unnest(p_hosts, p_room) AS r(h, n)
  ), eligible AS (
    SELECT s.id AS sid, s.host AS h, s.rate_limit_per_second IS NOT NULL AS paced,
           LEAST(COALESCE(r.n, p_default_room),
                 CASE WHEN s.rate_limit_per_second IS NULL THEN p_limit ELSE GREATEST(1, floor(s.rate_limit_per_second / 10.0))::int END) AS take
    FROM visited_subs v JOIN webhook_subscriptions s ON s.id = v.sid
    LEFT JOIN rooms r ON r.h = s.host
    WHERE COALESCE(r.n, p_default_room) > 0 AND (s.rate_limit_per_second IS NULL OR s.next_send_at IS NULL OR s.next_send_at <= p_now)
  ), pacers AS (
    -- Re-checked on the row's newest version once locked: another worker may have just taken this turn.
    SELECT s2.id AS sid FROM webhook_subscriptions s2
    WHERE s2.id IN (SELECT e.sid FROM eligible e WHERE e.paced) AND (s2.next_send_at IS NULL OR s2.next_send_at <= p_now)
    FOR NO KEY UPDATE SKIP LOCKED
  ), candidates AS (
    SELECT d.did, d.due_at, e.h FROM eligible e
    CROSS JOIN LATERAL (
      SELECT d2.id AS did, d2.next_attempt_at AS due_at FROM webhook_deliveries d2
      WHERE d2.subscription_id = e.sid AND d2.status = 'pending' AND d2.next_attempt_at <= p_now
        AND (d2.locked_until IS NULL OR d2.locked_until < p_now)
      ORDER BY d2.next_attempt_at LIMIT e.take) d
    WHERE NOT e.paced OR e.sid IN (SELECT pc.sid FROM pacers pc)
  ), ranked AS (
    SELECT c.did, c.due_at, row_number() OVER (PARTITION BY c.h ORDER BY c.due_at, c.did) AS rank, COALESCE(r.n, p_default_room) AS room
    FROM candidates c LEFT JOIN rooms r ON r.h = c.h
  ), chosen AS (
    SELECT rk.did FROM ranked rk WHERE rk.rank <= rk.room ORDER BY rk.due_at LIMIT p_limit
  ), claimed AS (
    UPDATE webhook_deliveries d SET locked_by = p_worker, locked_until = p_lease_until, updated_at = p_now
    FROM (
      SELECT d3.id AS did FROM webhook_deliveries d3
      WHERE d3.id = ANY (ARRAY(SELECT ch.did FROM chosen ch)) AND d3.status = 'pending' AND (d3.locked_until IS NULL OR d3.locked_until < p_now)
      FOR UPDATE SKIP LOCKED) due
    WHERE d.id = due.did
    RETURNING d.id AS did, d.tenant_id AS tid, d.event_id AS eid, d.event_type AS etype, d.subscription_id AS sid, d.cycle_attempts AS cycle
  ), paced_sends AS (
    UPDATE webhook_subscriptions s5
    SET next_send_at = GREATEST(COALESCE(s5.next_send_at, p_now), p_now) + make_interval(secs => sent.n / s5.rate_limit_per_second::float8)
    FROM (SELECT c2.sid, count(*) AS n FROM claimed c2 GROUP BY c2.sid) sent
    WHERE s5.id = sent.sid AND s5.rate_limit_per_second IS NOT NULL
    RETURNING s5.next_send_at AS wake_at)
  SELECT x.did, x.tid, x.eid, x.etype, x.sid, x.cycle, x.body, x.url, x.host, x.active, x.deleted, x.secret_sealed, x.key_ok, x.key_scopes,
         (SELECT min(ps.wake_at) FROM paced_sends ps), (SELECT max(vs.sid) FROM visited_subs vs), (SELECT count(*) FROM visited_subs vs2)::int
  FROM (SELECT 1) AS always_one_row LEFT JOIN (
    SELECT c.did, c.tid, c.eid, c.etype, c.sid, c.cycle,
           -- A subquery per row: the planner would hash-join the whole events table for a claim of a few rows.
           (SELECT e.body FROM webhook_events e WHERE e.id = c.eid) AS body,
           s.url, s.host, s.active, s.deleted_at IS NOT NULL AS deleted, s.secret_sealed,
           (k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > p_now)) AS key_ok, k.scopes AS key_scopes
    FROM claimed c
    JOIN webhook_subscriptions s ON s.id = c.sid
    JOIN api_keys k ON k.id = s.owner_api_key_id) x ON true;
END
$$;

-- The outcome writer's batch (src/webhooks/dispatch-repo.ts), in one call with plans kept per connection: the
-- subscriptions of the batch are locked in id order first (a PATCH or delete locks the subscription and then
-- its deliveries: the same order, so the two never deadlock); the deliveries this worker still leases take their
-- outcome and every attempt is logged; the applied outcomes fold into each subscription's health (a success
-- resets the streak, failures after the last success extend it and the first of them starts the auto-disable
-- clock). Returns the active subscriptions of the batch that have now failed every attempt for
-- p_disable_after_ms, at least p_min_failures times: the caller disables them (webhook_disable_failing).
CREATE FUNCTION webhook_record_outcomes(p_worker text, p_ids text[], p_tenants text[], p_subscriptions text[], p_status text[],
                                        p_next_attempt_at timestamptz[], p_http_status integer[], p_failure_code text[],
                                        p_finished_at timestamptz[], p_started_at timestamptz[], p_duration_ms integer[], p_error text[],
                                        p_disable_after_ms bigint, p_min_failures integer)
RETURNS TABLE (failing_id text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
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
