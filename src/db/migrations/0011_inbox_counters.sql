-- Inbox counts kept by the writes: per tenant, channel kind and owner (''= unowned), how many conversations
-- there are, how many have unread messages and how many need a reply. An unsearched inbox list reads its
-- counts here (a handful of rows) instead of counting the tenant's conversations on every request.
--
-- Statement-level triggers with transition tables keep it exact for every write path (the app's, a bulk
-- import, a hand-written fix): one aggregated upsert per statement, however many rows it touched.
-- Groups are upserted in key order so two transactions touching the same groups lock them in one order.
CREATE TABLE inbox_counters (
  tenant_id     text NOT NULL REFERENCES tenants (id),
  channel_kind  text NOT NULL,
  owner_key     text NOT NULL,
  total         integer NOT NULL,
  unread        integer NOT NULL,
  needs_reply   integer NOT NULL,
  PRIMARY KEY (tenant_id, channel_kind, owner_key)
);

-- Adds signed per-row contributions [{sign, tenant_id, channel_kind, owner_key, unread, needs_reply}] to the counters.
CREATE FUNCTION inbox_counters_apply(changes jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO inbox_counters AS ic (tenant_id, channel_kind, owner_key, total, unread, needs_reply)
  SELECT * FROM (
    SELECT c.tenant_id, c.channel_kind, c.owner_key, sum(c.sign)::int AS total,
           coalesce(sum(c.sign) FILTER (WHERE c.unread), 0)::int AS unread,
           coalesce(sum(c.sign) FILTER (WHERE c.needs_reply), 0)::int AS needs_reply
    FROM jsonb_to_recordset(changes) AS c(sign int, tenant_id text, channel_kind text, owner_key text, unread boolean, needs_reply boolean)
    GROUP BY c.tenant_id, c.channel_kind, c.owner_key
  ) d
  WHERE d.total <> 0 OR d.unread <> 0 OR d.needs_reply <> 0
  ORDER BY d.tenant_id, d.channel_kind, d.owner_key
  ON CONFLICT (tenant_id, channel_kind, owner_key) DO UPDATE SET
    total = ic.total + excluded.total, unread = ic.unread + excluded.unread, needs_reply = ic.needs_reply + excluded.needs_reply
$$;

CREATE FUNCTION inbox_counters_track() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER conversations_counters_insert AFTER INSERT ON conversations
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION inbox_counters_track();
CREATE TRIGGER conversations_counters_update AFTER UPDATE ON conversations
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION inbox_counters_track();
CREATE TRIGGER conversations_counters_delete AFTER DELETE ON conversations
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION inbox_counters_track();

INSERT INTO inbox_counters (tenant_id, channel_kind, owner_key, total, unread, needs_reply)
SELECT tenant_id, channel_kind, coalesce(owner_operator_id, ''), count(*), count(*) FILTER (WHERE unread_count > 0), count(*) FILTER (WHERE needs_reply)
FROM conversations GROUP BY 1, 2, 3;

-- The inbox filtered by channel, newest activity first (the owner filter has its own index since 0003).
CREATE INDEX conversations_channel ON conversations (tenant_id, channel_kind, last_message_at DESC, id DESC);
