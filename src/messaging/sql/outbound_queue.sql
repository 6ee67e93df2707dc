-- One outbound message queued in the caller's transaction (src/messaging/outbound.ts prepares its rows as the type
-- outbound_message): the message, the conversation's last activity, its message request (queued), the send job and
-- message.created (webhook_emit). The request is sent through its channel's provider (decisions 7.1). Returns the job's id and how many webhook deliveries the event fanned out to.
-- A send job carries no dedupe key: the request it sends is created here, so no other job could hold it, and the
-- send job never sends a request twice (src/messaging/pipeline.ts).
CREATE OR REPLACE FUNCTION outbound_queue(m outbound_message, OUT job_id bigint, OUT deliveries integer)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO messages (id, tenant_id, conversation_id, direction, text, request_event_id, created_at, type, media, reply_to_message_id, reaction)
  VALUES (m.message_id, m.tenant_id, m.conversation_id, 'outbound', m.text, m.request_id, m.at,
          COALESCE(m.message_type, CASE WHEN m.template_name IS NULL THEN 'text' ELSE 'template' END), m.media, m.reply_to_message_id, m.reaction);
  INSERT INTO message_requests (id, tenant_id, conversation_id, reply_id, channel_id, channel_kind, recipient_phone, template_name, locale, text,
                                status, provider, created_at, updated_at)
  VALUES (m.request_id, m.tenant_id, m.conversation_id, m.message_id, m.channel_id, m.channel_kind, m.recipient_phone, m.template_name, m.locale,
          m.text, 'queued', (SELECT c.provider FROM channels c WHERE c.id = m.channel_id AND c.tenant_id = m.tenant_id), m.at, m.at);
  -- The conversation after the rows that reference it (as conversation_replies): their key checks find its row unchanged.
  UPDATE conversations SET last_message_at = m.at, last_message_preview = m.preview, updated_at = m.at
  WHERE id = m.conversation_id AND tenant_id = m.tenant_id;
  INSERT INTO jobs (task, tenant_id, payload, run_at, max_attempts, created_at, updated_at)
  VALUES (m.job_task, m.tenant_id, m.job_payload, m.at, m.job_max_attempts, m.at, m.at)
  RETURNING id INTO job_id;
  deliveries := webhook_emit(m.tenant_id, m.event_id, m.event_type, m.at, m.event_body, m.event_read_scope, m.event_write_scope);
END
$$;

-- The same, from the JSON of an outbound_message.
CREATE OR REPLACE FUNCTION outbound_queue(p jsonb, OUT job_id bigint, OUT deliveries integer)
LANGUAGE sql AS $$ SELECT * FROM outbound_queue(jsonb_populate_record(NULL::outbound_message, p)) $$;
