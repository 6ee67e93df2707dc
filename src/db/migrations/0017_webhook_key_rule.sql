-- One statement of "the owning key may receive this event" (issue 18). It was written out twice: in the fan-out
-- of webhook_emit (0012) and in webhook_claim (0016), which re-checks it before every attempt. Both now call
-- these functions; which scopes grant an event's read scope (the scope itself or its write scope) is decided in
-- TypeScript only (src/auth/scopes.ts grantingScopes), which passes them in.
--
-- Plain SQL expressions, so the planner inlines them into the statements that call them (no call per row).
-- Signatures and results of webhook_emit and webhook_claim are unchanged: nodes of the previous release keep
-- working against this schema during a rolling upgrade.

-- An API key is in force at p_at: not revoked and not expired.
CREATE FUNCTION api_key_in_force(p_revoked_at timestamptz, p_expires_at timestamptz, p_at timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_revoked_at IS NULL AND (p_expires_at IS NULL OR p_expires_at > p_at) $$;

-- An API key is in force at p_at and holds at least one of p_granting (grantingScopes of the required scope).
CREATE FUNCTION api_key_grants(p_revoked_at timestamptz, p_expires_at timestamptz, p_scopes text[], p_at timestamptz, p_granting text[])
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT api_key_in_force(p_revoked_at, p_expires_at, p_at) AND p_scopes && p_granting $$;

-- The fan-out: subscriptions whose owning key grants the event's read scope (0012, otherwise unchanged).
CREATE OR REPLACE FUNCTION webhook_emit(p_tenant_id text, p_event_id text, p_type text, p_at timestamptz, p_body text, p_read_scope text, p_write_scope text)
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  fanned_out integer;
BEGIN
  INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at) VALUES (p_event_id, p_tenant_id, p_type, p_at, p_body, p_at);
  INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, next_attempt_at, created_at, updated_at)
  SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), s.tenant_id, p_event_id, p_type, s.id, 'pending', p_at, p_at, p_at
  FROM webhook_subscriptions s
  JOIN api_keys k ON k.id = s.owner_api_key_id
  WHERE s.tenant_id = p_tenant_id AND s.active AND s.deleted_at IS NULL AND p_type = ANY (s.events)
    AND api_key_grants(k.revoked_at, k.expires_at, k.scopes, p_at, ARRAY[p_read_scope, p_write_scope]);
  GET DIAGNOSTICS fanned_out = ROW_COUNT;
  RETURN fanned_out;
END
$$;

-- The claim: key_ok says whether the owning key is in force; the dispatcher checks its scopes with hasScope
-- (src/auth/scopes.ts), since the claim's rows carry no scope to check against (0016, otherwise unchanged).
CREATE OR REPLACE FUNCTION webhook_claim(p_worker text, p_now timestamptz, p_lease_until timestamptz, p_limit integer, p_subscriptions integer,
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
           api_key_in_force(k.revoked_at, k.expires_at, p_now) AS key_ok, k.scopes AS key_scopes
    FROM claimed c
    JOIN webhook_subscriptions s ON s.id = c.sid
    JOIN api_keys k ON k.id = s.owner_api_key_id) x ON true;
END
$$;
