-- Inbound messages written as a group (inbound_messages: src/conversations/sql/inbound_messages.sql): one row of this
-- type per message, its contact and conversation already found or created and locked by the caller
-- (src/conversations/inbound-batch.ts), its message.created event prepared (the body exactly as signed).
CREATE TYPE inbound_message AS (
  n                    integer,
  message_id           text,
  tenant_id            text,
  channel_id           text,
  contact_id           text,
  conversation_id      text,
  text                 text,
  at                   timestamptz,
  type                 text,
  source               text,
  provider_message_id  text,
  media                jsonb,
  location             jsonb,
  interactive          jsonb,
  reaction             jsonb,
  contacts             jsonb,
  reply_to_message_id  text,
  preview              text,
  event_id             text,
  event_body           text,
  event_read_scope     text,
  event_write_scope    text
);
