-- Conversation content and replies (decisions 6.2).
-- last_inbound_at: the contact's last inbound message, from which WhatsApp's 24-hour customer-service window
-- (and Messenger's and Instagram's standard messaging window) is measured. Kept by the inbound write.
ALTER TABLE conversations ADD COLUMN last_inbound_at timestamptz;
UPDATE conversations c SET last_inbound_at = m.at
FROM (SELECT conversation_id, max(created_at) AS at FROM messages WHERE direction = 'inbound' GROUP BY conversation_id) m
WHERE m.conversation_id = c.id;

-- A conversation's messages newest first, keyset on (created_at, id): read backwards, this index serves every page.
CREATE INDEX messages_conversation_page ON messages (conversation_id, created_at, id);
DROP INDEX messages_conversation;
