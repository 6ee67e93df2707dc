-- Inbox counters in shards: a tenant's counter row (per channel kind and owner) was written by every transaction that
-- creates a conversation or moves one's unread / needs-reply state, and each held its lock until commit, so a
-- tenant's inbound messages and replies committed one at a time on that row. Each database session now writes a
-- row of its own shard (inbox_counters_apply), so concurrent transactions rarely meet on one; a count is the sum of
-- its shards, as readers already sum the rows of a filter (src/conversations/search-sql.ts). The rows kept so far
-- are shard 0.
ALTER TABLE inbox_counters ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE inbox_counters DROP CONSTRAINT inbox_counters_pkey;
ALTER TABLE inbox_counters ADD PRIMARY KEY (tenant_id, channel_kind, owner_key, shard);
