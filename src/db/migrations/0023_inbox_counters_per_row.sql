-- Inbox counters on update: a row trigger that fires only when a counted attribute changes, instead of the
-- statement trigger with transition tables (0011). Most conversation updates change no count (a reply's last
-- activity, a preview, a contact copy), yet the statement trigger captured every updated row and ran its query
-- on every statement: a reply's conversation update took 0.49 ms with it and 0.30 ms without any update
-- trigger (docs/decisions.md, "Inbox counters on update"). The column list and the WHEN condition are checked
-- by the executor, without calling the function.
--
-- Inserts and deletes keep their statement triggers (one aggregated upsert per statement). An update that
-- changes the counts of many conversations now upserts per row; every such update of the code is of one
-- conversation.
DROP TRIGGER conversations_counters_update ON conversations;

CREATE FUNCTION inbox_counters_track_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM inbox_counters_apply(jsonb_build_array(
    jsonb_build_object('sign', -1, 'tenant_id', OLD.tenant_id, 'channel_kind', OLD.channel_kind, 'owner_key', coalesce(OLD.owner_operator_id, ''),
                       'unread', OLD.unread_count > 0, 'needs_reply', OLD.needs_reply),
    jsonb_build_object('sign', 1, 'tenant_id', NEW.tenant_id, 'channel_kind', NEW.channel_kind, 'owner_key', coalesce(NEW.owner_operator_id, ''),
                       'unread', NEW.unread_count > 0, 'needs_reply', NEW.needs_reply)));
  RETURN NULL;
END
$$;

CREATE TRIGGER conversations_counters_update
  AFTER UPDATE OF tenant_id, channel_kind, owner_operator_id, unread_count, needs_reply ON conversations
  FOR EACH ROW
  WHEN (OLD.tenant_id IS DISTINCT FROM NEW.tenant_id
        OR OLD.channel_kind IS DISTINCT FROM NEW.channel_kind
        OR OLD.owner_operator_id IS DISTINCT FROM NEW.owner_operator_id
        OR (OLD.unread_count > 0) IS DISTINCT FROM (NEW.unread_count > 0)
        OR OLD.needs_reply IS DISTINCT FROM NEW.needs_reply)
  EXECUTE FUNCTION inbox_counters_track_update();
