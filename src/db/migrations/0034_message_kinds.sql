-- Outbound messages of every kind (decisions 7.2): a reply may carry an attachment (its media, copied from a
-- knowledge asset when the reply is accepted), answer a message (replyToMessageId), or be a reaction. The rows of
-- one outbound message (outbound_message, prepared by src/messaging/outbound.ts) gain those fields; a message
-- prepared without them is a text or template message as before.
ALTER TYPE outbound_message
  ADD ATTRIBUTE message_type text CASCADE,
  ADD ATTRIBUTE media jsonb CASCADE,
  ADD ATTRIBUTE reply_to_message_id text CASCADE,
  ADD ATTRIBUTE reaction jsonb CASCADE;
