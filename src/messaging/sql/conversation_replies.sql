-- Replies (POST /conversations/{id}/messages) written as a group, in one statement committed on its own
-- (src/util/group-commit.ts gathers the replies that arrive while earlier ones are being written).
--
-- p_replies is a JSON array of reply_claim fields {message (outbound_message), windowHours, operation, key,
-- requestHash, response, expiresAt, staleBefore}; one row comes back per element, `ordinal` being its 1-based
-- position. Outcomes: taken (the key's earlier use: its answer), missing (no such conversation), refused (the
-- channel's rules), queued. Each table is written by one statement for the whole group, and conversations are
-- locked in id order, so that groups written at once cannot deadlock on them.
-- The send rules (send_refusal) and the customer-service window (reply_window) are decided here, under the
-- conversation's lock; a refusal returns its reason and the facts that explain it (src/messaging/reply.ts only
-- maps them to the error).
-- SET plan_cache_mode = force_generic_plan: the plan is kept per connection (the pool's sessions plan every
-- statement for its values otherwise, and planning this costs more than running it).
-- Its result type changed (refusal, window facts): CREATE OR REPLACE cannot change it, so the old one goes first.
DROP FUNCTION IF EXISTS conversation_replies(jsonb, text, text);
CREATE OR REPLACE FUNCTION conversation_replies(p_replies jsonb, p_jobs_channel text, p_webhooks_channel text)
RETURNS TABLE (ordinal integer, outcome text, stored_hash text, stored_state text, stored_status integer, stored_body jsonb,
               refusal text, window_hours integer, last_inbound timestamptz, window_closed_at timestamptz, deliveries integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  claims reply_claim[];
  decided integer[] := '{}';
  allowed integer[] := '{}';
  written integer[];
  fanned_out text[];
  r record;
BEGIN
  -- claims[n] is the n-th reply.
  SELECT array_agg(ROW(e.n::integer, (e.item ->> 'windowHours')::integer, e.item ->> 'operation', e.item ->> 'key', e.item ->> 'requestHash',
                       e.item -> 'response', (e.item ->> 'expiresAt')::timestamptz, (e.item ->> 'staleBefore')::timestamptz,
                       jsonb_populate_record(NULL::outbound_message, e.item -> 'message'))::reply_claim ORDER BY e.n)
  INTO claims FROM jsonb_array_elements(p_replies) WITH ORDINALITY AS e(item, n);

  -- An unexpired use of the key: its answer, unless it is an earlier version's claim of the same request that
  -- is stale, which is taken over like an expired one.
  FOR r IN SELECT c.n, k.request_hash, k.state, k.response_status, k.response_body
           FROM unnest(claims) c CROSS JOIN LATERAL (SELECT * FROM idempotency_keys i WHERE i.tenant_id = (c.m).tenant_id AND i.operation = c.operation AND i.key = c.key OFFSET 0) k
           WHERE k.expires_at > (c.m).at AND (k.state = 'completed' OR k.request_hash <> c.request_hash OR k.locked_at > c.stale_before) LOOP
    decided := decided || r.n;
    RETURN QUERY SELECT r.n, 'taken', r.request_hash, r.state, r.response_status, r.response_body, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::integer;
  END LOOP;

  -- The channel's rules under the conversations' locks, taken in one order so that groups written at once
  -- cannot deadlock on them. The recipient's phone is the contact's, read under the lock.
  FOR r IN SELECT c.n, send_refusal(ch.available, COALESCE(ct.opted_out, false), false, NULL) AS refusal, w.*, cv.last_inbound_at, ct.phone_e164
           FROM unnest(claims) c
           JOIN conversations cv ON cv.tenant_id = (c.m).tenant_id AND cv.id = (c.m).conversation_id AND cv.channel_id = (c.m).channel_id
           JOIN channels ch ON ch.id = cv.channel_id AND ch.tenant_id = cv.tenant_id
           LEFT JOIN contacts ct ON ct.id = cv.contact_id AND ct.tenant_id = cv.tenant_id
           CROSS JOIN LATERAL reply_window(cv.channel_kind, cv.last_inbound_at, (c.m).at) w
           WHERE NOT (c.n = ANY (decided))
           ORDER BY cv.id, c.n
           FOR NO KEY UPDATE OF cv LOOP
    decided := decided || r.n;
    IF r.refusal IS NOT NULL OR NOT r.open THEN
      RETURN QUERY SELECT r.n, 'refused', NULL::text, NULL::text, NULL::integer, NULL::jsonb, COALESCE(r.refusal, 'outside_customer_service_window'),
                          r.hours, r.last_inbound_at, r.closed_at, NULL::integer;
    ELSE
      allowed := allowed || r.n;
      claims[r.n].m.recipient_phone := r.phone_e164;
    END IF;
  END LOOP;
  RETURN QUERY SELECT c.n, 'missing', NULL::text, NULL::text, NULL::integer, NULL::jsonb, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::integer
               FROM unnest(claims) c WHERE NOT (c.n = ANY (decided));

  -- The keys, written with the messages so that a concurrent request with the same key waits on them and then
  -- gets its answer. A key used twice in the group is written by its first use.
  WITH firsts AS (
    SELECT DISTINCT ON ((c.m).tenant_id, c.operation, c.key) c.*
    FROM unnest(claims) c WHERE c.n = ANY (allowed)
    ORDER BY (c.m).tenant_id, c.operation, c.key, c.n
  ), stored AS (
    INSERT INTO idempotency_keys AS i (tenant_id, operation, key, request_hash, state, response_status, response_body, locked_at, created_at, expires_at)
    SELECT (f.m).tenant_id, f.operation, f.key, f.request_hash, 'completed', 202, f.response, (f.m).at, (f.m).at, f.expires_at FROM firsts f
    ON CONFLICT (tenant_id, operation, key) DO UPDATE SET request_hash = excluded.request_hash, state = 'completed',
      response_status = excluded.response_status, response_body = excluded.response_body, locked_at = excluded.locked_at,
      created_at = excluded.created_at, expires_at = excluded.expires_at
    WHERE i.expires_at <= excluded.created_at OR (i.state = 'in_progress' AND i.locked_at <= (SELECT f.stale_before FROM firsts f WHERE (f.m).tenant_id = i.tenant_id AND f.operation = i.operation AND f.key = i.key))
    RETURNING i.tenant_id, i.operation, i.key
  )
  SELECT COALESCE(array_agg(f.n), '{}') INTO written FROM firsts f JOIN stored s ON s.tenant_id = (f.m).tenant_id AND s.operation = f.operation AND s.key = f.key;

  -- A use of the key committed while this group waited for a conversation or the key, or the key's first use
  -- in this group: its answer.
  IF cardinality(written) < cardinality(allowed) THEN
    RETURN QUERY SELECT c.n, 'taken', k.request_hash, k.state, k.response_status, k.response_body, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::integer
                 FROM unnest(claims) c CROSS JOIN LATERAL (SELECT * FROM idempotency_keys i WHERE i.tenant_id = (c.m).tenant_id AND i.operation = c.operation AND i.key = c.key OFFSET 0) k
                 WHERE c.n = ANY (allowed) AND NOT (c.n = ANY (written));
  END IF;
  IF cardinality(written) = 0 THEN RETURN; END IF;

  -- outbound_queue's writes (migration 0021), for every written reply at once.
  INSERT INTO messages (id, tenant_id, conversation_id, direction, text, request_event_id, created_at)
  SELECT (c.m).message_id, (c.m).tenant_id, (c.m).conversation_id, 'outbound', (c.m).text, (c.m).request_id, (c.m).at
  FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY c.n;
  UPDATE conversations cv SET last_message_at = l.at, last_message_preview = l.preview, updated_at = l.at
  FROM (SELECT DISTINCT ON ((c.m).conversation_id) (c.m).conversation_id, (c.m).tenant_id, (c.m).at, (c.m).preview
        FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY (c.m).conversation_id, c.n DESC) l
  WHERE cv.id = l.conversation_id AND cv.tenant_id = l.tenant_id;
  INSERT INTO message_requests (id, tenant_id, conversation_id, reply_id, channel_id, channel_kind, recipient_phone, template_name, locale, text,
                                status, provider, created_at, updated_at)
  SELECT (c.m).request_id, (c.m).tenant_id, (c.m).conversation_id, (c.m).message_id, (c.m).channel_id, (c.m).channel_kind, (c.m).recipient_phone,
         (c.m).template_name, (c.m).locale, (c.m).text, 'queued', (c.m).provider, (c.m).at, (c.m).at
  FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY c.n;
  INSERT INTO jobs (task, tenant_id, payload, run_at, max_attempts, created_at, updated_at)
  SELECT (c.m).job_task, (c.m).tenant_id, (c.m).job_payload, (c.m).at, (c.m).job_max_attempts, (c.m).at, (c.m).at
  FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY c.n;

  -- webhook_emit (migration 0012) for every event at once.
  INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at)
  SELECT (c.m).event_id, (c.m).tenant_id, (c.m).event_type, (c.m).at, (c.m).event_body, (c.m).at
  FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY c.n;
  WITH fanned AS (
    INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, next_attempt_at, created_at, updated_at)
    SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), s.tenant_id, (c.m).event_id, (c.m).event_type, s.id, 'pending', (c.m).at, (c.m).at, (c.m).at
    FROM unnest(claims) c
    JOIN webhook_subscriptions s ON s.tenant_id = (c.m).tenant_id AND s.active AND s.deleted_at IS NULL AND (c.m).event_type = ANY (s.events)
    JOIN api_keys k ON k.id = s.owner_api_key_id
    WHERE c.n = ANY (written) AND api_key_grants(k.revoked_at, k.expires_at, k.scopes, (c.m).at, ARRAY[(c.m).event_read_scope, (c.m).event_write_scope])
    RETURNING event_id
  )
  SELECT COALESCE(array_agg(fanned.event_id), '{}') INTO fanned_out FROM fanned;

  PERFORM pg_notify(p_jobs_channel, '');
  IF cardinality(fanned_out) > 0 THEN PERFORM pg_notify(p_webhooks_channel, ''); END IF;
  RETURN QUERY SELECT c.n, 'queued', NULL::text, NULL::text, NULL::integer, NULL::jsonb, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz,
                      (SELECT count(*)::integer FROM unnest(fanned_out) e WHERE e = (c.m).event_id)
               FROM unnest(claims) c WHERE c.n = ANY (written);
END
$$;
