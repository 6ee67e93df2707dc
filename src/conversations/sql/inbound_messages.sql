-- Inbound messages written as a group (src/conversations/inbound-batch.ts, also for one message), one statement per
-- table. p_items is a JSON array of inbound_message rows in
-- arrival order (`n` their 1-based position); their conversations are locked by the caller. A provider message id
-- its channel already has, or that an earlier item of the group has, writes nothing (a redelivery). For each
-- conversation, the messages apply in order: a message at or after the conversation's last activity (and every
-- earlier item's) raises unread and needs-reply and becomes the preview; an older (imported) one only moves the
-- customer-service window forward when it is the latest inbound.
-- Returns the items written and how many webhook deliveries each one's message.created fanned out to.
CREATE OR REPLACE FUNCTION inbound_messages(p_items jsonb, p_now timestamptz)
RETURNS TABLE (n integer, deliveries integer)
LANGUAGE plpgsql AS $$
DECLARE
  items inbound_message[];
  written integer[];
  fanned_out text[];
BEGIN
  SELECT array_agg(i ORDER BY i.n) INTO items FROM jsonb_populate_recordset(NULL::inbound_message, p_items) i;

  WITH fresh AS (
    SELECT DISTINCT ON (i.channel_id, COALESCE(i.provider_message_id, i.message_id)) i.*
    FROM unnest(items) i ORDER BY i.channel_id, COALESCE(i.provider_message_id, i.message_id), i.n
  ), inserted AS (
    INSERT INTO messages (id, tenant_id, conversation_id, direction, text, created_at, type, source, channel_id, provider_message_id,
                          media, location, interactive, reaction, contacts, reply_to_message_id)
    SELECT f.message_id, f.tenant_id, f.conversation_id, 'inbound', f.text, f.at, f.type, f.source, f.channel_id, f.provider_message_id,
           f.media, f.location, f.interactive, f.reaction, f.contacts, f.reply_to_message_id
    FROM fresh f ORDER BY f.n
    ON CONFLICT (channel_id, provider_message_id) WHERE provider_message_id IS NOT NULL DO NOTHING
    RETURNING id
  )
  SELECT COALESCE(array_agg(i.n ORDER BY i.n), '{}') INTO written FROM unnest(items) i JOIN inserted ON inserted.id = i.message_id;
  IF cardinality(written) = 0 THEN RETURN; END IF;

  -- The conversations' obligations and last activity for every written message, in order, aggregated per conversation.
  UPDATE conversations cv SET
    last_inbound_at = GREATEST(cv.last_inbound_at, a.latest), updated_at = p_now,
    unread_count = cv.unread_count + a.counted,
    needs_reply = cv.needs_reply OR a.counted > 0,
    needs_reply_reason = CASE WHEN a.counted > 0 THEN 'inbound_message' ELSE cv.needs_reply_reason END,
    needs_reply_detail = CASE WHEN a.counted > 0 THEN a.preview ELSE cv.needs_reply_detail END,
    needs_reply_event_id = CASE WHEN a.counted > 0 THEN a.message_id ELSE cv.needs_reply_event_id END,
    last_message_preview = CASE WHEN a.counted > 0 THEN a.preview ELSE cv.last_message_preview END,
    last_message_at = GREATEST(cv.last_message_at, a.latest)
  FROM (
    SELECT w.conversation_id, w.tenant_id, max(w.at) AS latest, (count(*) FILTER (WHERE w.counts))::integer AS counted,
           (array_agg(w.preview ORDER BY w.n DESC) FILTER (WHERE w.counts))[1] AS preview,
           (array_agg(w.message_id ORDER BY w.n DESC) FILTER (WHERE w.counts))[1] AS message_id
    FROM (SELECT i.*, i.at >= GREATEST(c.last_message_at, max(i.at) OVER (PARTITION BY i.conversation_id ORDER BY i.n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) AS counts
          FROM unnest(items) i JOIN conversations c ON c.id = i.conversation_id AND c.tenant_id = i.tenant_id
          WHERE i.n = ANY (written)) w
    GROUP BY w.conversation_id, w.tenant_id
  ) a
  WHERE cv.id = a.conversation_id AND cv.tenant_id = a.tenant_id;

  -- recordActivity.
  INSERT INTO conversation_activity (tenant_id, conversation_id, kind, actor_type, actor_id, data, created_at)
  SELECT i.tenant_id, i.conversation_id, 'message.inbound', 'contact', i.contact_id, jsonb_build_object('messageId', i.message_id), p_now
  FROM unnest(items) i WHERE i.n = ANY (written) ORDER BY i.n;

  -- webhook_emit's writes for every message.created at once.
  INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at)
  SELECT i.event_id, i.tenant_id, 'message.created', p_now, i.event_body, p_now
  FROM unnest(items) i WHERE i.n = ANY (written) ORDER BY i.n;
  WITH fanned AS (
    INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, next_attempt_at, created_at, updated_at)
    SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), s.tenant_id, i.event_id, 'message.created', s.id, 'pending', p_now, p_now, p_now
    FROM unnest(items) i
    JOIN webhook_subscriptions s ON s.tenant_id = i.tenant_id AND s.active AND s.deleted_at IS NULL AND 'message.created' = ANY (s.events)
    JOIN api_keys k ON k.id = s.owner_api_key_id
    WHERE i.n = ANY (written) AND api_key_grants(k.revoked_at, k.expires_at, k.scopes, p_now, ARRAY[i.event_read_scope, i.event_write_scope])
    ORDER BY i.n
    RETURNING event_id
  )
  SELECT COALESCE(array_agg(fanned.event_id), '{}') INTO fanned_out FROM fanned;

  RETURN QUERY SELECT i.n, (SELECT count(*)::integer FROM unnest(fanned_out) e WHERE e = i.event_id)
               FROM unnest(items) i WHERE i.n = ANY (written) ORDER BY i.n;
END
$$;
