-- What the webchat provider sends (src/channels/webchat/provider.ts): events added to a visitor's stream, in one
-- statement committed on its own. The visitor's session on the widget is read, its writers serialised
-- (webchat_lock_visitor), the events inserted in the order given and the streams of every node woken at commit.
-- p_events is a JSON array of {kind, data}. Returns the new event ids in that order; none when the visitor has no
-- session on this widget (then nothing is written).
CREATE OR REPLACE FUNCTION webchat_events_write(p_visitor_id text, p_widget_id text, p_events jsonb, p_at timestamptz, p_channel text)
RETURNS TABLE (id text) LANGUAGE plpgsql AS $$
DECLARE
  v_tenant_id text;
  e jsonb;
BEGIN
  SELECT s.tenant_id INTO v_tenant_id FROM webchat_sessions s WHERE s.id = p_visitor_id AND s.widget_id = p_widget_id;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  PERFORM webchat_lock_visitor(p_visitor_id);
  FOR e IN SELECT x.value FROM jsonb_array_elements(p_events) WITH ORDINALITY AS x(value, n) ORDER BY x.n LOOP
    INSERT INTO webchat_events (tenant_id, widget_id, visitor_id, kind, data, created_at)
    VALUES (v_tenant_id, p_widget_id, p_visitor_id, e ->> 'kind', e -> 'data', p_at)
    RETURNING webchat_events.id::text INTO id;
    RETURN NEXT;
  END LOOP;
  PERFORM pg_notify(p_channel, '');
END
$$;
