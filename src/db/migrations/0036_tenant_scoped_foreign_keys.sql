-- The reply path's references to a conversation carry the tenant (and, for a message request, the channel) with
-- the conversation's id, so that one check proves all three: the conversation exists, it is the row's tenant's,
-- and a request goes out on its conversation's channel. They replace the separate keys 0028 restored on messages
-- and message requests (tenant, conversation and channel, each its own check): a row can no longer name a
-- conversation of another tenant, and each reply pays one check where it paid five, none of them on the
-- tenant's or the channel's row that every concurrent reply of the tenant would otherwise lock.
-- The tenant still exists through the conversation's own key to it.
ALTER TABLE conversations
  ADD CONSTRAINT conversations_tenant_id_id_key UNIQUE (tenant_id, id),
  ADD CONSTRAINT conversations_tenant_id_id_channel_id_key UNIQUE (tenant_id, id, channel_id);

ALTER TABLE messages
  DROP CONSTRAINT messages_tenant_id_fkey,
  DROP CONSTRAINT messages_conversation_id_fkey,
  ADD CONSTRAINT messages_conversation_fkey FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id);

ALTER TABLE message_requests
  DROP CONSTRAINT message_requests_tenant_id_fkey,
  DROP CONSTRAINT message_requests_conversation_id_fkey,
  DROP CONSTRAINT message_requests_channel_id_fkey,
  ADD CONSTRAINT message_requests_conversation_fkey FOREIGN KEY (tenant_id, conversation_id, channel_id)
    REFERENCES conversations (tenant_id, id, channel_id);
