-- The event feed (GET /events): a position in the stream that a consumer can follow forever.
--
-- Events are ordered by the id of the transaction that wrote them, then by the order they were written in it.
-- A reader sees only events whose transaction is older than the oldest transaction still in flight
-- (pg_snapshot_xmin of its own snapshot): those transactions have all finished, so no event can appear later
-- at a position before one already read, however transactions commit (the outbox-order problem).
ALTER TABLE webhook_events ADD COLUMN tx_id xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE webhook_events ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX webhook_events_feed ON webhook_events (tenant_id, tx_id, seq);
