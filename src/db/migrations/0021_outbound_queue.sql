-- An outbound message in one statement (issue 19). Queuing a message was five statements and a reply thirteen
-- (BEGIN, the key's lock and row, conversation, channel, contact, message, conversation update, request, job,
-- event, stored response, COMMIT); under load each cost a round trip and a PostgreSQL backend's wake-up, and
-- replies ran at 0.07x the rate of a conversation read. The writes are unchanged, only gathered here.

-- Every row of one outbound message, as src/messaging/outbound.ts prepares it (passed as jsonb).
CREATE TYPE outbound_message AS (
  tenant_id text, conversation_id text, at timestamptz,
  message_id text, text text, preview text,
  request_id text, channel_id text, channel_kind text, recipient_phone text, template_name text, locale text, provider text,
  job_task text, job_payload jsonb, job_max_attempts integer,
  event_id text, event_type text, event_body text, event_read_scope text, event_write_scope text
);

-- The outbound message, the conversation's last activity, its message request (queued), the send job and
-- message.created, in the caller's transaction. Returns the job's id (null when one with the same dedupe key is
-- pending) and how many webhook deliveries the event fanned out to.
CREATE FUNCTION outbound_queue(m outbound_message, OUT job_id bigint, OUT deliveries integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  INSERT INTO messages (id, tenant_id, conversation_id, direction, text, request_event_id, created_at)
  VALUES (m.message_id, m.tenant_id, m.conversation_id, 'outbound', m.text, m.request_id, m.at);
  UPDATE conversations SET last_message_at = m.at, last_message_preview = m.preview, updated_at = m.at
  WHERE id = m.conversation_id AND tenant_id = m.tenant_id;
  INSERT INTO message_requests (id, tenant_id, conversation_id, reply_id, channel_id, channel_kind, recipient_phone, template_name, locale, text,
                                status, provider, created_at, updated_at)
  VALUES (m.request_id, m.tenant_id, m.conversation_id, m.message_id, m.channel_id, m.channel_kind, m.recipient_phone, m.template_name, m.locale,
          m.text, 'queued', m.provider, m.at, m.at);
  INSERT INTO jobs (task, tenant_id, payload, dedupe_key, run_at, max_attempts, created_at, updated_at)
  VALUES (m.job_task, m.tenant_id, m.job_payload, m.request_id, m.at, m.job_max_attempts, m.at, m.at)
  ON CONFLICT (task, dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'running') DO NOTHING
  RETURNING id INTO job_id;
  deliveries := webhook_emit(m.tenant_id, m.event_id, m.event_type, m.at, m.event_body, m.event_read_scope, m.event_write_scope);
END
$$;

CREATE FUNCTION outbound_queue(p jsonb, OUT job_id bigint, OUT deliveries integer)
LANGUAGE sql AS $$ SELECT * FROM outbound_queue(jsonb_populate_record(NULL::outbound_message, p)) $$;

-- A plain-text reply (POST /conversations/{id}/messages) as one statement, so one round trip, committed on its
-- own: the Idempotency-Key's stored response, the channel's rules under the conversation's row lock, and the
-- outbound message. It keeps the rules of runIdempotent (src/http/idempotency.ts): an unexpired use of the key
-- is returned for answerTaken to replay or refuse, unless it is an earlier version's claim of the same request
-- locked before p_stale_before, which is replaced like an expired one; the key's row is written with the
-- message, so a concurrent request with the same key waits on it and then gets its answer.
-- The channel's rules are decided in TypeScript (src/messaging/channel-rules.ts): p_window_hours is the
-- channel's window (null: none), and a refusal returns what TypeScript needs to explain it. The recipient's
-- phone is the contact's, read under the lock. Outcomes: queued, taken (the key's earlier use), missing, refused.
CREATE FUNCTION conversation_reply(p_message jsonb, p_window_hours integer, p_operation text, p_key text, p_request_hash text,
                                   p_response_body jsonb, p_expires_at timestamptz, p_stale_before timestamptz,
                                   p_jobs_channel text, p_webhooks_channel text)
RETURNS TABLE (outcome text, stored_hash text, stored_state text, stored_status integer, stored_body jsonb,
               channel_available boolean, contact_opted_out boolean, last_inbound timestamptz, deliveries integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  m outbound_message := jsonb_populate_record(NULL::outbound_message, p_message);
  k idempotency_keys%ROWTYPE;
  queued record;
BEGIN
  SELECT * INTO k FROM idempotency_keys i WHERE i.tenant_id = m.tenant_id AND i.operation = p_operation AND i.key = p_key AND i.expires_at > m.at;
  IF FOUND AND (k.state = 'completed' OR k.request_hash <> p_request_hash OR k.locked_at > p_stale_before) THEN
    RETURN QUERY SELECT 'taken', k.request_hash, k.state, k.response_status, k.response_body, NULL::boolean, NULL::boolean, NULL::timestamptz, NULL::integer;
    RETURN;
  END IF;

  SELECT ch.available, COALESCE(ct.opted_out, false), cv.last_inbound_at, ct.phone_e164
  INTO channel_available, contact_opted_out, last_inbound, m.recipient_phone
  FROM conversations cv
  JOIN channels ch ON ch.id = cv.channel_id AND ch.tenant_id = cv.tenant_id
  LEFT JOIN contacts ct ON ct.id = cv.contact_id AND ct.tenant_id = cv.tenant_id
  WHERE cv.tenant_id = m.tenant_id AND cv.id = m.conversation_id AND cv.channel_id = m.channel_id
  FOR NO KEY UPDATE OF cv;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'missing', NULL::text, NULL::text, NULL::integer, NULL::jsonb, NULL::boolean, NULL::boolean, NULL::timestamptz, NULL::integer;
    RETURN;
  END IF;
  IF NOT channel_available OR contact_opted_out
     OR (p_window_hours IS NOT NULL AND (last_inbound IS NULL OR m.at - last_inbound >= make_interval(hours => p_window_hours))) THEN
    RETURN QUERY SELECT 'refused', NULL::text, NULL::text, NULL::integer, NULL::jsonb, channel_available, contact_opted_out, last_inbound, NULL::integer;
    RETURN;
  END IF;

  INSERT INTO idempotency_keys AS i (tenant_id, operation, key, request_hash, state, response_status, response_body, locked_at, created_at, expires_at)
  VALUES (m.tenant_id, p_operation, p_key, p_request_hash, 'completed', 202, p_response_body, m.at, m.at, p_expires_at)
  ON CONFLICT (tenant_id, operation, key) DO UPDATE SET request_hash = excluded.request_hash, state = 'completed',
    response_status = excluded.response_status, response_body = excluded.response_body, locked_at = excluded.locked_at,
    created_at = excluded.created_at, expires_at = excluded.expires_at
  WHERE i.expires_at <= m.at OR (i.state = 'in_progress' AND i.locked_at <= p_stale_before);
  IF NOT FOUND THEN
    -- A request with the same key committed while this one waited for the conversation or the key: its answer.
    SELECT * INTO k FROM idempotency_keys i WHERE i.tenant_id = m.tenant_id AND i.operation = p_operation AND i.key = p_key;
    RETURN QUERY SELECT 'taken', k.request_hash, k.state, k.response_status, k.response_body, NULL::boolean, NULL::boolean, NULL::timestamptz, NULL::integer;
    RETURN;
  END IF;

  SELECT * INTO queued FROM outbound_queue(m);
  IF queued.job_id IS NOT NULL THEN PERFORM pg_notify(p_jobs_channel, ''); END IF;
  IF queued.deliveries > 0 THEN PERFORM pg_notify(p_webhooks_channel, ''); END IF;
  RETURN QUERY SELECT 'queued', NULL::text, NULL::text, NULL::integer, NULL::jsonb, NULL::boolean, NULL::boolean, NULL::timestamptz, queued.deliveries;
END
$$;
