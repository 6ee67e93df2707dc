-- Outbound sends: one message request per accepted send, moved along by the send job and provider callbacks.

ALTER TABLE channels ADD COLUMN provider_ref text;

CREATE TABLE message_requests (
  id                    text PRIMARY KEY,
  tenant_id             text NOT NULL REFERENCES tenants (id),
  conversation_id       text NOT NULL REFERENCES conversations (id),
  reply_id              text NOT NULL REFERENCES messages (id),
  channel_id            text NOT NULL REFERENCES channels (id),
  channel_kind          text NOT NULL,
  recipient_phone       text,
  template_name         text,
  locale                text,
  text                  text NOT NULL,
  status                text NOT NULL CHECK (status IN ('queued', 'sent', 'delivered', 'read', 'failed')),
  provider              text NOT NULL,
  provider_message_id   text,
  -- Set while a provider call is in flight; still set after a crash means the outcome is unknown.
  dispatching_at        timestamptz,
  dispatch_attempts     integer NOT NULL DEFAULT 0,
  unknown_outcomes      integer NOT NULL DEFAULT 0,
  error_code            text,
  error_message         text,
  reconciled_at         timestamptz,
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL
);
CREATE UNIQUE INDEX message_requests_provider_id ON message_requests (provider, provider_message_id) WHERE provider_message_id IS NOT NULL;
CREATE INDEX message_requests_failed_recipient ON message_requests (tenant_id, recipient_phone) WHERE status = 'failed' AND reconciled_at IS NULL;
