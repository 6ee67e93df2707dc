-- Conversations: contacts, the inbox, messages, review cases, handoffs and the activity log.

CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;

CREATE TABLE contacts (
  id            text PRIMARY KEY,
  tenant_id     text NOT NULL REFERENCES tenants (id),
  name          text,
  phone_e164    text,
  handle        text,
  consent       boolean NOT NULL DEFAULT false,
  opted_out     boolean NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL
);
CREATE UNIQUE INDEX contacts_phone ON contacts (tenant_id, phone_e164) WHERE phone_e164 IS NOT NULL;
CREATE UNIQUE INDEX contacts_handle ON contacts (tenant_id, handle) WHERE phone_e164 IS NULL AND handle IS NOT NULL;

CREATE TABLE conversations (
  id                     text PRIMARY KEY,
  tenant_id              text NOT NULL REFERENCES tenants (id),
  channel_id             text NOT NULL REFERENCES channels (id),
  channel_kind           text NOT NULL,
  contact_id             text NOT NULL REFERENCES contacts (id),
  owner_operator_id      text REFERENCES operators (id),
  unread_count           integer NOT NULL DEFAULT 0,
  needs_reply            boolean NOT NULL DEFAULT false,
  needs_reply_reason     text,
  needs_reply_detail     text,
  needs_reply_event_id   text,
  last_message_at        timestamptz NOT NULL,
  last_message_preview   text,
  open_review_id         text,
  open_handoff_id        text,
  last_read_at           timestamptz,
  last_read_by           text,
  -- lower(name) phone-digits lower(handle): what the dashboard's contact search matches.
  search_text            text NOT NULL DEFAULT '',
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  UNIQUE (channel_id, contact_id)
);
CREATE INDEX conversations_inbox ON conversations (tenant_id, last_message_at DESC, id DESC);
CREATE INDEX conversations_owner ON conversations (tenant_id, owner_operator_id, last_message_at DESC, id DESC);
CREATE INDEX conversations_contact ON conversations (contact_id);
CREATE INDEX conversations_search ON conversations USING gin (search_text public.gin_trgm_ops);

CREATE TABLE messages (
  id                text PRIMARY KEY,
  tenant_id         text NOT NULL REFERENCES tenants (id),
  conversation_id   text NOT NULL REFERENCES conversations (id),
  direction         text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  text              text NOT NULL,
  request_event_id  text,
  created_at        timestamptz NOT NULL
);
CREATE INDEX messages_conversation ON messages (conversation_id, created_at);

CREATE TABLE review_cases (
  id                       text PRIMARY KEY,
  tenant_id                text NOT NULL REFERENCES tenants (id),
  conversation_id          text NOT NULL REFERENCES conversations (id),
  status                   text NOT NULL CHECK (status IN ('requested', 'resolved')),
  reason_code              text NOT NULL,
  note                     text,
  requested_by_id          text NOT NULL,
  requested_by_name        text NOT NULL,
  assigned_operator_id     text REFERENCES operators (id),
  requested_at             timestamptz NOT NULL,
  resolved_at              timestamptz,
  resolution_note          text
);
CREATE UNIQUE INDEX review_cases_one_open ON review_cases (conversation_id) WHERE status = 'requested';

CREATE TABLE handoffs (
  id                    text PRIMARY KEY,
  tenant_id             text NOT NULL REFERENCES tenants (id),
  conversation_id       text NOT NULL REFERENCES conversations (id),
  status                text NOT NULL CHECK (status IN ('open', 'resolved')),
  assigned_operator_id  text REFERENCES operators (id),
  opened_at             timestamptz NOT NULL,
  resolved_at           timestamptz,
  updated_at            timestamptz NOT NULL
);
CREATE UNIQUE INDEX handoffs_one_open ON handoffs (conversation_id) WHERE status = 'open';

-- Who did what to a conversation; also the source of the dashboard's realtime stream.
CREATE TABLE conversation_activity (
  id               bigserial PRIMARY KEY,
  tenant_id        text NOT NULL REFERENCES tenants (id),
  conversation_id  text NOT NULL REFERENCES conversations (id),
  kind             text NOT NULL,
  actor_type       text NOT NULL CHECK (actor_type IN ('api_key', 'operator', 'system', 'contact')),
  actor_id         text,
  data             jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at       timestamptz NOT NULL
);
CREATE INDEX conversation_activity_tenant ON conversation_activity (tenant_id, id);
