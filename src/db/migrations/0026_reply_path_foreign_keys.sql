-- The foreign keys checked on every reply and every outbound send (issue 19, docs/decisions.md "Foreign keys on
-- the write path"): the tenant, conversation and channel of a message, its message request, its event and its
-- Idempotency-Key, and the request's message. Each insert ran a key-share lock query per key; the tenant's and the
-- channel's rows, shared by every reply, were locked by every transaction at once. Their parents are never
-- deleted, and every writer takes the ids from rows it reads in the same transaction (the conversation under its
-- lock), so these checks could never fail. Foreign keys whose parents are deleted (a delivery's event, which is
-- pruned; an attempt's delivery) stay.
ALTER TABLE messages DROP CONSTRAINT messages_tenant_id_fkey, DROP CONSTRAINT messages_conversation_id_fkey;
ALTER TABLE message_requests
  DROP CONSTRAINT message_requests_tenant_id_fkey, DROP CONSTRAINT message_requests_conversation_id_fkey,
  DROP CONSTRAINT message_requests_reply_id_fkey, DROP CONSTRAINT message_requests_channel_id_fkey;
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_tenant_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_tenant_id_fkey;
