-- Adds signed per-row contributions [{sign, tenant_id, channel_kind, owner_key, unread, needs_reply}] to the inbox counters
-- (table inbox_counters) in the shard of this database session (migration 0037), so that transactions of other
-- sessions do not wait for this one's commit on the same row; a session's transaction touches one shard only. Groups
-- are upserted in key order so two transactions touching the same groups lock them in one order.
-- PL/pgSQL rather than SQL: the triggers call it once per counted change, and a SQL function's body is planned again
-- on every call, while PL/pgSQL keeps the statement's plan for the session.
CREATE OR REPLACE FUNCTION inbox_counters_apply(changes jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO inbox_counters AS ic (tenant_id, channel_kind, owner_key, shard, total, unread, needs_reply)
  SELECT * FROM (
    SELECT c.tenant_id, c.channel_kind, c.owner_key, (pg_backend_pid() % 64)::smallint AS shard, sum(c.sign)::int AS total,
           coalesce(sum(c.sign) FILTER (WHERE c.unread), 0)::int AS unread,
           coalesce(sum(c.sign) FILTER (WHERE c.needs_reply), 0)::int AS needs_reply
    FROM jsonb_to_recordset(changes) AS c(sign int, tenant_id text, channel_kind text, owner_key text, unread boolean, needs_reply boolean)
    GROUP BY c.tenant_id, c.channel_kind, c.owner_key
  ) d
  WHERE d.total <> 0 OR d.unread <> 0 OR d.needs_reply <> 0
  ORDER BY d.tenant_id, d.channel_kind, d.owner_key
  ON CONFLICT (tenant_id, channel_kind, owner_key, shard) DO UPDATE SET
    total = ic.total + excluded.total, unread = ic.unread + excluded.unread, needs_reply = ic.needs_reply + excluded.needs_reply;
END
$$;
