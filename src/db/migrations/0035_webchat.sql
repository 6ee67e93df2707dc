-- Webchat (decisions 7.3). A visitor's session: who it is (`id`, the visitorId, also the contact's handle), the
-- widget and channel it belongs to, when it was last used (tokens expire after 30 days idle) and its message
-- count in the current minute (the per-session rate limit, shared by every node).
CREATE TABLE webchat_sessions (
  id                text PRIMARY KEY,
  tenant_id         text NOT NULL,
  channel_id        text NOT NULL,
  widget_id         text NOT NULL,
  name              text,
  conversation_id   text,
  created_at        timestamptz NOT NULL,
  last_seen_at      timestamptz NOT NULL,
  rate_window_start timestamptz NOT NULL,
  rate_count        integer NOT NULL DEFAULT 0
);

-- What a visitor's stream carries, in order: messages both ways, typing and "seen". `id` is the stream's
-- event id (Last-Event-ID) and the `after` of GET /webchat/v1/messages. Rows of one visitor are written under
-- that visitor's advisory lock, so ids commit in order and a reader that resumes after an id misses nothing.
CREATE TABLE webchat_events (
  id          bigserial PRIMARY KEY,
  tenant_id   text NOT NULL,
  widget_id   text NOT NULL,
  visitor_id  text NOT NULL,
  kind        text NOT NULL CHECK (kind IN ('message', 'typing', 'read', 'reaction')),
  data        jsonb NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX webchat_events_visitor ON webchat_events (visitor_id, id);

-- Files the business sends to visitors: uploaded by the webchat provider, served to the visitors they went to.
CREATE TABLE webchat_media (
  id            text PRIMARY KEY,
  widget_id     text NOT NULL,
  content_type  text NOT NULL,
  filename      text NOT NULL,
  bytes         bytea NOT NULL,
  created_at    timestamptz NOT NULL
);
