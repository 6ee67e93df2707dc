-- The foreign keys of messages, message requests, events and Idempotency-Keys, as 0001-0004 declared them (0026
-- dropped them). Existing rows satisfy them: no code deletes a tenant, channel, conversation or message, and every
-- writer took these ids from rows it read in the same transaction, so adding them validated is safe; a row that
-- did not satisfy one would stop this migration, as it should, rather than be kept unchecked (NOT VALID).
ALTER TABLE messages
  ADD CONSTRAINT messages_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id),
  ADD CONSTRAINT messages_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations (id);
ALTER TABLE message_requests
  ADD CONSTRAINT message_requests_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id),
  ADD CONSTRAINT message_requests_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations (id),
  ADD CONSTRAINT message_requests_reply_id_fkey FOREIGN KEY (reply_id) REFERENCES messages (id),
  ADD CONSTRAINT message_requests_channel_id_fkey FOREIGN KEY (channel_id) REFERENCES channels (id);
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
