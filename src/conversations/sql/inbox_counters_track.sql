-- Keeps inbox_counters exact for inserts and deletes of conversations (statement triggers with transition tables:
-- one aggregated upsert per statement, however many rows it touched). Updates have inbox_counters_track_update.
CREATE OR REPLACE FUNCTION inbox_counters_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  changes jsonb;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT jsonb_agg(to_jsonb(r)) INTO changes FROM (
      SELECT 1 AS sign, tenant_id, channel_kind, coalesce(owner_operator_id, '') AS owner_key, unread_count > 0 AS unread, needs_reply FROM new_rows) r;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT jsonb_agg(to_jsonb(r)) INTO changes FROM (
      SELECT -1 AS sign, tenant_id, channel_kind, coalesce(owner_operator_id, '') AS owner_key, unread_count > 0 AS unread, needs_reply FROM old_rows) r;
  ELSE
    -- Most updates (a preview, a review flag, a contact copy) change no count: their old and new rows cancel
    -- out and nothing is written.
    SELECT jsonb_agg(to_jsonb(r)) INTO changes FROM (
      (SELECT -1 AS sign, tenant_id, channel_kind, coalesce(owner_operator_id, '') AS owner_key, unread_count > 0 AS unread, needs_reply FROM old_rows
       EXCEPT ALL
       SELECT -1, tenant_id, channel_kind, coalesce(owner_operator_id, ''), unread_count > 0, needs_reply FROM new_rows)
      UNION ALL
      (SELECT 1, tenant_id, channel_kind, coalesce(owner_operator_id, ''), unread_count > 0, needs_reply FROM new_rows
       EXCEPT ALL
       SELECT 1, tenant_id, channel_kind, coalesce(owner_operator_id, ''), unread_count > 0, needs_reply FROM old_rows)
    ) r;
  END IF;
  IF changes IS NOT NULL THEN
    PERFORM inbox_counters_apply(changes);
  END IF;
  RETURN NULL;
END
$$;
