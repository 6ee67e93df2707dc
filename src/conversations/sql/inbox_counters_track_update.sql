-- Keeps inbox_counters exact for an update of a conversation: a row trigger that fires only when a counted attribute
-- changes (its column list and WHEN condition are checked without calling the function), since most updates change no count.
CREATE OR REPLACE FUNCTION inbox_counters_track_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM inbox_counters_apply(jsonb_build_array(
    jsonb_build_object('sign', -1, 'tenant_id', OLD.tenant_id, 'channel_kind', OLD.channel_kind, 'owner_key', coalesce(OLD.owner_operator_id, ''),
                       'unread', OLD.unread_count > 0, 'needs_reply', OLD.needs_reply),
    jsonb_build_object('sign', 1, 'tenant_id', NEW.tenant_id, 'channel_kind', NEW.channel_kind, 'owner_key', coalesce(NEW.owner_operator_id, ''),
                       'unread', NEW.unread_count > 0, 'needs_reply', NEW.needs_reply)));
  RETURN NULL;
END
$$;
