-- Sends the provider accepted (src/messaging/pipeline.ts): for each, fenced by the send job's lease, the job
-- succeeds, the message request records the provider's id and moves to sent (message_status_moves), and that move
-- emits message.delivery.updated (its body prepared by the caller). A request that moved on already (a status
-- callback came first) records the id and emits nothing.
-- p_sends is a JSON array of {tenantId, requestId, providerMessageId, at, jobId, workerId, eventId, eventBody,
-- eventReadScope, eventWriteScope}. Outcomes: sent, unchanged (recorded, no move), missing (the request is gone:
-- nothing written), lease_lost (another worker holds the job: nothing written).
CREATE OR REPLACE FUNCTION message_sends_accepted(p_sends jsonb, p_webhooks_channel text)
RETURNS TABLE (ordinal integer, outcome text, deliveries integer)
LANGUAGE plpgsql AS $$
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
      status = CASE WHEN message_status_moves(v_status, 'sent') THEN 'sent' ELSE status END, updated_at = s.at
    WHERE id = s."requestId" AND tenant_id = s."tenantId";
    IF message_status_moves(v_status, 'sent') THEN
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
