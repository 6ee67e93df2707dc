-- Channels are real connections (decisions 7.1): a provider fixed at creation, the connection's public
-- identifiers in `connection` (phone-number id, WABA id, page id, account id, allowed origins, widget id) and
-- its tokens sealed with the keyring's AES-GCM key in `connection_secret` (never returned). `provider_ref` is the
-- provider's address of the channel (WhatsApp phone-number id, page id, Instagram account id, widget id):
-- callbacks find their channel by it, so it is unique per provider.
-- Existing channels become `sandbox`: the default of CHANNEL_PROVIDER, of every test and of the demo. WhatsApp
-- channels that named a phone-number id are marked `legacy_sender`: a deployment that still sets the old
-- CHANNEL_PROVIDER=whatsapp at its next start turns them into `whatsapp_cloud` channels (src/channels/legacy.ts),
-- so it keeps sending through the Cloud API; any other start clears the mark.
ALTER TABLE channels
  ADD COLUMN provider text NOT NULL DEFAULT 'sandbox' CHECK (provider IN ('sandbox', 'whatsapp_cloud', 'messenger', 'instagram', 'webchat')),
  ADD COLUMN connection jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN connection_secret text,
  ADD COLUMN last_inbound_at timestamptz,
  ADD COLUMN last_outbound_at timestamptz,
  ADD COLUMN last_error_code text,
  ADD COLUMN last_error_message text,
  ADD COLUMN last_error_at timestamptz,
  -- Set when the provider refused the channel's credentials; cleared by a later success or a new connection.
  ADD COLUMN failing_since timestamptz,
  ADD COLUMN legacy_sender boolean NOT NULL DEFAULT false;
UPDATE channels SET legacy_sender = true WHERE kind = 'whatsapp' AND provider_ref IS NOT NULL;
CREATE UNIQUE INDEX channels_provider_ref ON channels (provider, provider_ref) WHERE provider <> 'sandbox' AND provider_ref IS NOT NULL;

-- Messages of every kind (decisions 7.2). `channel_id` and `provider_message_id` for messages that came from a
-- provider: a redelivery of the same provider message id on the same channel writes nothing.
ALTER TABLE messages
  ADD COLUMN type text NOT NULL DEFAULT 'text',
  ADD COLUMN source text,
  ADD COLUMN channel_id text,
  ADD COLUMN provider_message_id text,
  ADD COLUMN media jsonb,
  ADD COLUMN location jsonb,
  ADD COLUMN interactive jsonb,
  ADD COLUMN reaction jsonb,
  ADD COLUMN contacts jsonb,
  ADD COLUMN reply_to_message_id text,
  ADD COLUMN read_at timestamptz;
CREATE UNIQUE INDEX messages_provider_message ON messages (channel_id, provider_message_id) WHERE provider_message_id IS NOT NULL;

-- Meta's callbacks, stored before they are acknowledged and processed by a job (channels.process-callback).
CREATE TABLE provider_callbacks (
  id            text PRIMARY KEY,
  provider      text NOT NULL,
  object        text NOT NULL,
  body          text NOT NULL,
  received_at   timestamptz NOT NULL,
  processed_at  timestamptz
);
CREATE INDEX provider_callbacks_processed ON provider_callbacks (processed_at) WHERE processed_at IS NOT NULL;

-- The provider said the customer-service window is closed (WhatsApp 131047): reply_window takes it into account.
ALTER TABLE conversations ADD COLUMN window_closed_at timestamptz;
-- reply_window gained that argument (src/messaging/sql/reply_window.sql); the old signature would stay beside it.
DROP FUNCTION IF EXISTS reply_window(text, timestamptz, timestamptz);
