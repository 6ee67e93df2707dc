-- Replies (POST /conversations/{id}/messages) written as a group, in one statement committed on its own
-- (src/util/group-commit.ts gathers the replies that arrive while earlier ones are being written).
--
-- p_replies is a JSON array of reply_claim fields {message (outbound_message), operation, key, requestHash,
-- response, expiresAt}; one row comes back per element, `ordinal` being its 1-based position. Outcomes: taken (the
-- key's earlier use: its answer), missing (no such conversation), refused (the send rules), queued.
-- The Idempotency-Keys follow the one protocol (idempotency_claims, idempotency_stores: a group's keys at once),
-- waiting for a use of a key still running. Keys are claimed in key order before any conversation is locked, and
-- conversations are locked in id order, so that groups written at once cannot deadlock. Each table is written by
-- one statement for the whole group.
-- The send rules (send_refusal) and the customer-service window (reply_window) are decided here, under the
-- conversation's lock; a refusal returns its reason and the facts that explain it (src/messaging/reply.ts only
-- maps them to the error).
-- Its result type changes now and then: CREATE OR REPLACE cannot change it, so the old one goes first.
DROP FUNCTION IF EXISTS conversation_replies(jsonb, text, text);
CREATE OR REPLACE FUNCTION conversation_replies(p_replies jsonb, p_jobs_channel text, p_webhooks_channel text)
RETURNS TABLE (ordinal integer, outcome text, stored_hash text, stored_status integer, stored_body jsonb,
               refusal text, window_hours integer, last_inbound timestamptz, window_closed_at timestamptz, deliveries integer)
LANGUAGE plpgsql AS $$
DECLARE
  claims reply_claim[];
  decided integer[] := '{}';
  allowed integer[] := '{}';
  written integer[];
  fanned_out text[];
  r record;
BEGIN
  -- claims[n] is the n-th reply.
  SELECT array_agg(ROW(e.n::integer, e.item ->> 'operation', e.item ->> 'key', e.item ->> 'requestHash', e.item -> 'response',
                       (e.item ->> 'expiresAt')::timestamptz, jsonb_populate_record(NULL::outbound_message, e.item -> 'message'))::reply_claim ORDER BY e.n)
  INTO claims FROM jsonb_array_elements(p_replies) WITH ORDINALITY AS e(item, n);

  -- The keys, claimed together (in key order): an unexpired use is the reply's answer.
  FOR r IN SELECT k.* FROM (SELECT array_agg((c.m).tenant_id ORDER BY c.n) AS t, array_agg(c.operation ORDER BY c.n) AS o, array_agg(c.key ORDER BY c.n) AS k,
                                   array_agg((c.m).at ORDER BY c.n) AS at FROM unnest(claims) c) a
           CROSS JOIN LATERAL idempotency_claims(a.t, a.o, a.k, a.at, true) k WHERE k.outcome = 'taken' LOOP
    decided := decided || r.ordinal;
    RETURN QUERY SELECT r.ordinal, 'taken', r.stored_hash, r.stored_status, r.stored_body, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::integer;
  END LOOP;

  -- The send rules under the conversations' locks. The recipient's phone is the contact's, read under the lock;
  -- the provider is the channel's.
  FOR r IN SELECT c.n, send_refusal(ch.available, COALESCE(ct.opted_out, false), false, NULL) AS refusal, w.*, cv.last_inbound_at, ct.phone_e164,
                  ch.provider AS channel_provider
           FROM unnest(claims) c
           JOIN conversations cv ON cv.tenant_id = (c.m).tenant_id AND cv.id = (c.m).conversation_id AND cv.channel_id = (c.m).channel_id
           JOIN channels ch ON ch.id = cv.channel_id AND ch.tenant_id = cv.tenant_id
           LEFT JOIN contacts ct ON ct.id = cv.contact_id AND ct.tenant_id = cv.tenant_id
           CROSS JOIN LATERAL reply_window(cv.channel_kind, cv.last_inbound_at, cv.window_closed_at, (c.m).at) w
           WHERE NOT (c.n = ANY (decided))
           ORDER BY cv.id, c.n
           FOR NO KEY UPDATE OF cv LOOP
    decided := decided || r.n;
    IF r.refusal IS NOT NULL OR NOT r.open THEN
      RETURN QUERY SELECT r.n, 'refused', NULL::text, NULL::integer, NULL::jsonb, COALESCE(r.refusal, 'outside_customer_service_window'),
                          r.hours, r.last_inbound_at, r.closed_at, NULL::integer;
    ELSE
      allowed := allowed || r.n;
      claims[r.n].m.recipient_phone := r.phone_e164;
      -- The request is sent through its channel's provider (decisions 7.1), read with the channel.
      claims[r.n].m.provider := r.channel_provider;
    END IF;
  END LOOP;
  RETURN QUERY SELECT c.n, 'missing', NULL::text, NULL::integer, NULL::jsonb, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::integer
               FROM unnest(claims) c WHERE NOT (c.n = ANY (decided));

  -- The answers, stored with the messages. A key used twice in the group is stored by its first use; the other
  -- uses get that answer (a replay, or a conflict for another request).
  SELECT COALESCE(array_agg(f.n), '{}') INTO written FROM (
    SELECT DISTINCT ON ((c.m).tenant_id, c.operation, c.key) c.n FROM unnest(claims) c WHERE c.n = ANY (allowed)
    ORDER BY (c.m).tenant_id, c.operation, c.key, c.n) f;
  PERFORM idempotency_stores(array_agg((c.m).tenant_id ORDER BY c.n), array_agg(c.operation ORDER BY c.n), array_agg(c.key ORDER BY c.n),
                             array_agg(c.request_hash ORDER BY c.n), array_agg(202 ORDER BY c.n), array_agg(c.response ORDER BY c.n),
                             array_agg((c.m).at ORDER BY c.n), array_agg(c.expires_at ORDER BY c.n))
  FROM unnest(claims) c WHERE c.n = ANY (written) HAVING count(*) > 0;
  -- A key's later uses in the group: its first use's answer, now stored.
  FOR r IN SELECT d.n, k.stored_hash, k.stored_status, k.stored_body
           FROM (SELECT array_agg(c.n ORDER BY c.n) AS ns, array_agg((c.m).tenant_id ORDER BY c.n) AS t, array_agg(c.operation ORDER BY c.n) AS o,
                        array_agg(c.key ORDER BY c.n) AS k, array_agg((c.m).at ORDER BY c.n) AS at
                 FROM unnest(claims) c WHERE c.n = ANY (allowed) AND NOT (c.n = ANY (written)) HAVING count(*) > 0) a
           CROSS JOIN LATERAL idempotency_claims(a.t, a.o, a.k, a.at, true) k
           CROSS JOIN LATERAL (SELECT a.ns[k.ordinal] AS n) d LOOP
    RETURN QUERY SELECT r.n, 'taken', r.stored_hash, r.stored_status, r.stored_body, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::integer;
  END LOOP;
  IF cardinality(written) = 0 THEN RETURN; END IF;

  -- outbound_queue's writes, for every written reply at once.
  -- The message's kind (decisions 7.2): text unless the reply carries an attachment or is a reaction.
  INSERT INTO messages (id, tenant_id, conversation_id, direction, text, request_event_id, created_at, type, media, reply_to_message_id, reaction)
  SELECT (c.m).message_id, (c.m).tenant_id, (c.m).conversation_id, 'outbound', (c.m).text, (c.m).request_id, (c.m).at,
         COALESCE((c.m).message_type, 'text'), (c.m).media, (c.m).reply_to_message_id, (c.m).reaction
  FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY c.n;
  INSERT INTO message_requests (id, tenant_id, conversation_id, reply_id, channel_id, channel_kind, recipient_phone, template_name, locale, text,
                                status, provider, created_at, updated_at)
  SELECT (c.m).request_id, (c.m).tenant_id, (c.m).conversation_id, (c.m).message_id, (c.m).channel_id, (c.m).channel_kind, (c.m).recipient_phone,
         (c.m).template_name, (c.m).locale, (c.m).text, 'queued', (c.m).provider, (c.m).at, (c.m).at
  FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY c.n;
  -- The conversations last: the key checks of the rows above find each conversation's row as this transaction
  -- locked it, while a version written by this UPDATE would have to be locked again, row by row.
  UPDATE conversations cv SET last_message_at = l.at, last_message_preview = l.preview, updated_at = l.at
  FROM (SELECT DISTINCT ON ((c.m).conversation_id) (c.m).conversation_id, (c.m).tenant_id, (c.m).at, (c.m).preview
        FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY (c.m).conversation_id, c.n DESC) l
  WHERE cv.id = l.conversation_id AND cv.tenant_id = l.tenant_id;
  INSERT INTO jobs (task, tenant_id, payload, run_at, max_attempts, created_at, updated_at)
  SELECT (c.m).job_task, (c.m).tenant_id, (c.m).job_payload, (c.m).at, (c.m).job_max_attempts, (c.m).at, (c.m).at
  FROM unnest(claims) c WHERE c.n = ANY (written) ORDER BY c.n;

  -- webhook_emit's writes for every event at once.
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
  RETURN QUERY SELECT c.n, 'queued', NULL::text, NULL::integer, NULL::jsonb, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz,
                      (SELECT count(*)::integer FROM unnest(fanned_out) e WHERE e = (c.m).event_id)
               FROM unnest(claims) c WHERE c.n = ANY (written);
END
$$;
