-- Group commit (issue 19, docs/decisions.md "Replies and sends in groups"): replies, and sends the provider
-- accepted, that arrive while earlier ones are being written are written together, in one statement and one
-- transaction: one round trip, one commit, one WAL flush and one wake-up for the group instead of one each
-- (src/util/group-commit.ts).

-- Replies. Every reply keeps conversation_reply's rules and outcomes; this replaces it.
--
-- p_replies is a JSON array of {message (outbound_message), windowHours, operation, key, requestHash, response,
-- expiresAt, staleBefore}; one row comes back per element, `ordinal` being its 1-based position. Replies are
-- written in conversation order, so that groups written at once lock conversations in one order.
DROP FUNCTION conversation_reply(jsonb, integer, text, text, text, jsonb, timestamptz, timestamptz, text, text);

CREATE FUNCTION conversation_replies(p_replies jsonb, p_jobs_channel text, p_webhooks_channel text)
RETURNS TABLE (ordinal integer, outcome text, stored_hash text, stored_state text, stored_status integer, stored_body jsonb,
               channel_available boolean, contact_opted_out boolean, last_inbound timestamptz, deliveries integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  r record;
  m outbound_message;
  k idempotency_keys%ROWTYPE;
  queued record;
  v_key text;
  v_operation text;
  v_request_hash text;
  v_window_hours integer;
  v_stale_before timestamptz;
  wake_jobs boolean := false;
  wake_webhooks boolean := false;
BEGIN
  FOR r IN SELECT e.item, e.n::integer AS n FROM jsonb_array_elements(p_replies) WITH ORDINALITY AS e(item, n)
           ORDER BY e.item #>> '{message,conversation_id}', e.n LOOP
    m := jsonb_populate_record(NULL::outbound_message, r.item -> 'message');
    v_key := r.item ->> 'key';
    v_operation := r.item ->> 'operation';
    v_request_hash := r.item ->> 'requestHash';
    v_window_hours := (r.item ->> 'windowHours')::integer;
    v_stale_before := (r.item ->> 'staleBefore')::timestamptz;
    ordinal := r.n;
    outcome := NULL; stored_hash := NULL; stored_state := NULL; stored_status := NULL; stored_body := NULL;
    channel_available := NULL; contact_opted_out := NULL; last_inbound := NULL; deliveries := NULL;

    SELECT * INTO k FROM idempotency_keys i
    WHERE i.tenant_id = m.tenant_id AND i.operation = v_operation AND i.key = v_key AND i.expires_at > m.at;
    IF FOUND AND (k.state = 'completed' OR k.request_hash <> v_request_hash OR k.locked_at > v_stale_before) THEN
      outcome := 'taken'; stored_hash := k.request_hash; stored_state := k.state; stored_status := k.response_status; stored_body := k.response_body;
      RETURN NEXT;
      CONTINUE;
    END IF;

    SELECT ch.available, COALESCE(ct.opted_out, false), cv.last_inbound_at, ct.phone_e164
    INTO channel_available, contact_opted_out, last_inbound, m.recipient_phone
    FROM conversations cv
    JOIN channels ch ON ch.id = cv.channel_id AND ch.tenant_id = cv.tenant_id
    LEFT JOIN contacts ct ON ct.id = cv.contact_id AND ct.tenant_id = cv.tenant_id
    WHERE cv.tenant_id = m.tenant_id AND cv.id = m.conversation_id AND cv.channel_id = m.channel_id
    FOR NO KEY UPDATE OF cv;
    IF NOT FOUND THEN
      outcome := 'missing';
      RETURN NEXT;
      CONTINUE;
    END IF;
    IF NOT channel_available OR contact_opted_out
       OR (v_window_hours IS NOT NULL AND (last_inbound IS NULL OR m.at - last_inbound >= make_interval(hours => v_window_hours))) THEN
      outcome := 'refused';
      RETURN NEXT;
      CONTINUE;
    END IF;

    INSERT INTO idempotency_keys AS i (tenant_id, operation, key, request_hash, state, response_status, response_body, locked_at, created_at, expires_at)
    VALUES (m.tenant_id, v_operation, v_key, v_request_hash, 'completed', 202, r.item -> 'response', m.at, m.at, (r.item ->> 'expiresAt')::timestamptz)
    ON CONFLICT (tenant_id, operation, key) DO UPDATE SET request_hash = excluded.request_hash, state = 'completed',
      response_status = excluded.response_status, response_body = excluded.response_body, locked_at = excluded.locked_at,
      created_at = excluded.created_at, expires_at = excluded.expires_at
    WHERE i.expires_at <= m.at OR (i.state = 'in_progress' AND i.locked_at <= v_stale_before);
    IF NOT FOUND THEN
      -- A request with the same key committed while this one waited for the conversation or the key: its answer.
      SELECT * INTO k FROM idempotency_keys i WHERE i.tenant_id = m.tenant_id AND i.operation = v_operation AND i.key = v_key;
      outcome := 'taken'; stored_hash := k.request_hash; stored_state := k.state; stored_status := k.response_status; stored_body := k.response_body;
      RETURN NEXT;
      CONTINUE;
    END IF;

    SELECT * INTO queued FROM outbound_queue(m);
    wake_jobs := wake_jobs OR queued.job_id IS NOT NULL;
    wake_webhooks := wake_webhooks OR queued.deliveries > 0;
    outcome := 'queued'; deliveries := queued.deliveries;
    RETURN NEXT;
  END LOOP;
  IF wake_jobs THEN PERFORM pg_notify(p_jobs_channel, ''); END IF;
  IF wake_webhooks THEN PERFORM pg_notify(p_webhooks_channel, ''); END IF;
END
$$;

-- Sends the provider accepted (src/messaging/pipeline.ts): for each, fenced by the send job's lease, the job
-- succeeds, the message request records the provider's id and moves from queued to sent, and that move emits
-- message.delivery.updated (its body prepared by the caller). A request that moved on already (a status
-- callback came first) records the id and emits nothing, as moveStatus would.
-- p_sends is a JSON array of {tenantId, requestId, providerMessageId, at, jobId, workerId, eventId, eventBody,
-- eventReadScope, eventWriteScope}. Outcomes: sent, unchanged (recorded, no move), missing (the request is gone:
-- nothing written), lease_lost (another worker holds the job: nothing written).
CREATE FUNCTION message_sends_accepted(p_sends jsonb, p_webhooks_channel text)
RETURNS TABLE (ordinal integer, outcome text, deliveries integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  s record;
  v_status text;
  wake_webhooks boolean := false;
BEGIN
  FOR s IN SELECT e.n::integer AS n, x.*
           FROM jsonb_array_elements(p_sends) WITH ORDINALITY AS e(item, n),
                jsonb_to_record(e.item) AS x("tenantId" text, "requestId" text, "providerMessageId" text, at timestamptz, "jobId" bigint,
                                             "workerId" text, "eventId" text, "eventBody" text, "eventReadScope" text, "eventWriteScope" text)
           ORDER BY x."requestId", e.n LOOP
    ordinal := s.n;
    deliveries := 0;
    SELECT r.status INTO v_status FROM message_requests r WHERE r.id = s."requestId" AND r.tenant_id = s."tenantId" FOR UPDATE;
    IF NOT FOUND THEN
      outcome := 'missing';
      RETURN NEXT;
      CONTINUE;
    END IF;
    UPDATE jobs SET state = 'succeeded', finished_at = s.at, updated_at = s.at, locked_by = NULL, locked_until = NULL
    WHERE id = s."jobId" AND locked_by = s."workerId" AND state = 'running';
    IF NOT FOUND THEN
      outcome := 'lease_lost';
      RETURN NEXT;
      CONTINUE;
    END IF;
    UPDATE message_requests SET provider_message_id = s."providerMessageId", dispatching_at = NULL, error_code = NULL, error_message = NULL,
      status = CASE WHEN v_status = 'queued' THEN 'sent' ELSE status END, updated_at = s.at
    WHERE id = s."requestId" AND tenant_id = s."tenantId";
    IF v_status = 'queued' THEN
      deliveries := webhook_emit(s."tenantId", s."eventId", 'message.delivery.updated', s.at, s."eventBody", s."eventReadScope", s."eventWriteScope");
      wake_webhooks := wake_webhooks OR deliveries > 0;
      outcome := 'sent';
    ELSE
      outcome := 'unchanged';
    END IF;
    RETURN NEXT;
  END LOOP;
  IF wake_webhooks THEN PERFORM pg_notify(p_webhooks_channel, ''); END IF;
END
$$;

-- The job claim (src/jobs/job-repo.ts) as a function, so that it is always planned as the ordered index scans
-- that stop at the limit, once per connection (plpgsql keeps the plan; a SQL function plans it on every call).
-- During a burst the planner's statistics of `jobs` lag behind (autovacuum analyses a minute later) and it chose
-- a bitmap scan of every due job and a sort: 2.4 ms a claim with a few thousand queued, 51 ms with 28,000,
-- against 0.07 ms for the index scan. JIT is off because the disabled plans' cost would switch it on (~0.45 s).
-- The indexes now match the claim's order exactly.
CREATE INDEX jobs_due_order ON jobs (run_at, id) WHERE state = 'queued';
DROP INDEX jobs_due;
CREATE INDEX jobs_leased_order ON jobs (locked_until, id) WHERE state = 'running';
DROP INDEX jobs_leased;

-- Leases up to p_limit jobs of p_tasks, never one of p_running (the worker's own): expired leases first, then
-- due jobs oldest first.
CREATE FUNCTION jobs_claim(p_worker text, p_lease_until timestamptz, p_now timestamptz, p_tasks text[], p_limit integer, p_running bigint[])
RETURNS TABLE (id bigint, task text, tenant_id text, payload jsonb, attempts integer, max_attempts integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_bitmapscan = off SET enable_sort = off SET jit = off AS $$
BEGIN
  RETURN QUERY WITH expired AS (
    SELECT j.id FROM jobs j
    WHERE j.state = 'running' AND j.locked_until < p_now AND j.task = ANY (p_tasks)
      -- never re-take a job this worker is still running (a stalled event loop can outlive the lease)
      AND NOT (j.id = ANY (p_running))
    ORDER BY j.locked_until, j.id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  ), due AS (
    SELECT j.id FROM jobs j
    WHERE j.state = 'queued' AND j.run_at <= p_now AND j.task = ANY (p_tasks)
    ORDER BY j.run_at, j.id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  )
  UPDATE jobs j SET state = 'running', locked_by = p_worker, locked_until = p_lease_until, attempts = j.attempts + 1, updated_at = p_now
  WHERE j.id IN (SELECT picked.id FROM (SELECT e.id, 0 AS side FROM expired e UNION ALL SELECT d.id, 1 FROM due d) picked ORDER BY picked.side LIMIT p_limit)
  RETURNING j.id, j.task, j.tenant_id, j.payload, j.attempts, j.max_attempts;
END
$$;
