-- conversation_replies (0024) finds each reply's key, conversation, channel and contact by primary key, for at most
-- a group of replies: a nested loop over the group with an index lookup for each is always the right plan. Its plans
-- are generic and cached per connection, so one made from a small table's statistics (a hash join over a scan of
-- idempotency_keys, a scan of the tenant's conversations for each reply) was kept while the table grew, until the
-- next ANALYZE: on a new database such scans were a large part of a reply's time in the database. With these off
-- the plans no longer scan or hash a whole table (an index led by tenant_id can still be taken for a primary key
-- on a table never analysed: docs/decisions.md "Replies and sends in groups"). JIT is off as in
-- jobs_claim (0022): a path these settings disable is costed so high that it would pass JIT's threshold.
ALTER FUNCTION conversation_replies(jsonb, text, text)
  SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off;
