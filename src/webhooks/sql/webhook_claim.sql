-- The claim of the webhook dispatcher (src/webhooks/dispatch-repo.ts), per subscription rather than over one
-- global queue: the subscriptions with pending deliveries are found by skipping through the pending index (one
-- probe each, at most p_subscriptions per claim, round robin after p_after), and each gives its oldest due
-- deliveries up to its host's room in this worker or, when rate-limited, a tenth of a second's worth of its
-- rate (at least one), its next_send_at moving on by the time those take. The cost is bounded by what is
-- claimed and the subscriptions visited, never by the backlog, and a full destination or a throttled
-- subscription holds up no other. Chosen rows are locked with SKIP LOCKED and re-checked, so two workers never
-- claim the same row; a throttled subscription is claimed by one worker at a time (its row lock).
--
-- Each subscription's candidates take turns (each one's oldest, then each one's second, ...), within a host's room
-- and within the limit: a subscription gets an equal share of a claim whatever the age of its backlog, and oldest
-- first within it. key_ok says whether the owning key is in force (api_key_in_force); the dispatcher checks its
-- scopes with hasScope (src/auth/scopes.ts). Always one row at least: with a null id when nothing was claimed,
-- for the round robin's position.
CREATE OR REPLACE FUNCTION webhook_claim(p_worker text, p_now timestamptz, p_lease_until timestamptz, p_limit integer, p_subscriptions integer,
                              p_after text, p_hosts text[], p_room integer[], p_default_room integer)
RETURNS TABLE (id text, tenant_id text, event_id text, event_type text, subscription_id text, cycle_attempts integer, body text,
               url text, host text, active boolean, deleted boolean, secret_sealed text, key_ok boolean, key_scopes text[],
               paced_wake_at timestamptz, last_visited text, visited integer)
LANGUAGE plpgsql AS $$
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
    SELECT d.did, d.due_at, e.sid, e.h FROM eligible e
    CROSS JOIN LATERAL (
      SELECT d2.id AS did, d2.next_attempt_at AS due_at FROM webhook_deliveries d2
      WHERE d2.subscription_id = e.sid AND d2.status = 'pending' AND d2.next_attempt_at <= p_now
        AND (d2.locked_until IS NULL OR d2.locked_until < p_now)
      ORDER BY d2.next_attempt_at LIMIT e.take) d
    WHERE NOT e.paced OR e.sid IN (SELECT pc.sid FROM pacers pc)
  ), turns AS (
    -- Each subscription's candidates take turns: its oldest first, then every subscription's second, and so on.
    SELECT c.did, c.due_at, c.h, row_number() OVER (PARTITION BY c.sid ORDER BY c.due_at, c.did) AS turn FROM candidates c
  ), ranked AS (
    SELECT t.did, t.due_at, t.turn, row_number() OVER (PARTITION BY t.h ORDER BY t.turn, t.due_at, t.did) AS rank, COALESCE(r.n, p_default_room) AS room
    FROM turns t LEFT JOIN rooms r ON r.h = t.h
  ), chosen AS (
    SELECT rk.did FROM ranked rk WHERE rk.rank <= rk.room ORDER BY rk.turn, rk.due_at, rk.did LIMIT p_limit
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
           api_key_in_force(k.revoked_at, k.expires_at, p_now) AS key_ok, k.scopes AS key_scopes
    FROM claimed c
    JOIN webhook_subscriptions s ON s.id = c.sid
    JOIN api_keys k ON k.id = s.owner_api_key_id) x ON true;
END
$$;
