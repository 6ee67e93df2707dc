-- Status moves of message requests (provider status callbacks and read watermarks, send failures, the admin API), in
-- the caller's transaction, for any number at once (src/messaging/status.ts prepares them), in the order given: the
-- request moves only when message_status_moves allows it, keeping its error unless one is given; a move to read marks
-- the message read at the time it happened; each move emits message.delivery.updated (webhook_emit, the body
-- prepared by the caller). The requests are locked first, in id order, so that two transactions moving the same
-- requests cannot deadlock.
-- p_moves is a JSON array of {tenantId, requestId, status, errorCode, errorMessage, at, eventId, eventBody,
-- eventReadScope, eventWriteScope}. One row per element (`ordinal` its 1-based position): whether it moved, the
-- request's error after it, and how many webhook deliveries its event fanned out to.
CREATE OR REPLACE FUNCTION message_status_apply(p_moves jsonb, p_now timestamptz)
RETURNS TABLE (ordinal integer, moved boolean, new_error_code text, new_error_message text, deliveries integer)
LANGUAGE plpgsql AS $$
DECLARE
  m record;
  v_reply text;
BEGIN
  PERFORM 1 FROM message_requests r
  WHERE (r.tenant_id, r.id) IN (SELECT e ->> 'tenantId', e ->> 'requestId' FROM jsonb_array_elements(p_moves) e)
  ORDER BY r.id FOR NO KEY UPDATE;
  FOR m IN SELECT e.n::integer AS n, x.*
           FROM jsonb_array_elements(p_moves) WITH ORDINALITY AS e(item, n),
                jsonb_to_record(e.item) AS x("tenantId" text, "requestId" text, status text, "errorCode" text, "errorMessage" text, at timestamptz,
                                             "eventId" text, "eventBody" text, "eventReadScope" text, "eventWriteScope" text)
           ORDER BY e.n LOOP
    ordinal := m.n;
    deliveries := 0;
    UPDATE message_requests r SET status = m.status, error_code = COALESCE(m."errorCode", r.error_code),
      error_message = COALESCE(m."errorMessage", r.error_message), updated_at = p_now
    WHERE r.id = m."requestId" AND r.tenant_id = m."tenantId" AND message_status_moves(r.status, m.status)
    RETURNING r.reply_id, r.error_code, r.error_message INTO v_reply, new_error_code, new_error_message;
    moved := FOUND;
    IF moved THEN
      IF m.status = 'read' THEN
        UPDATE messages SET read_at = COALESCE(read_at, m.at) WHERE id = v_reply AND tenant_id = m."tenantId";
      END IF;
      deliveries := webhook_emit(m."tenantId", m."eventId", 'message.delivery.updated', p_now, m."eventBody", m."eventReadScope", m."eventWriteScope");
    ELSE
      new_error_code := NULL;
      new_error_message := NULL;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;
