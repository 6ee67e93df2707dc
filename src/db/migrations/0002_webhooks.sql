-- Webhooks: subscriptions, the event outbox, deliveries (which are their own work queue) and attempts.

CREATE TABLE webhook_subscriptions (
  id                text PRIMARY KEY,
  tenant_id         text NOT NULL REFERENCES tenants (id),
  url               text NOT NULL,
  -- Host of url, for the per-destination concurrency cap.
  host              text NOT NULL,
  events            text[] NOT NULL,
  active            boolean NOT NULL DEFAULT true,
  description       text,
  owner_api_key_id  text NOT NULL REFERENCES api_keys (id),
  -- AES-256-GCM sealed signing secret (see src/secrets.ts).
  secret_sealed     text NOT NULL,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  deleted_at        timestamptz
);
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, created_at) WHERE deleted_at IS NULL;
CREATE INDEX webhook_subscriptions_owner ON webhook_subscriptions (owner_api_key_id) WHERE deleted_at IS NULL;

CREATE TABLE webhook_events (
  id           text PRIMARY KEY,
  tenant_id    text NOT NULL REFERENCES tenants (id),
  type         text NOT NULL,
  occurred_at  timestamptz NOT NULL,
  -- The exact JSON body sent to receivers, fixed at emit time so every attempt sends the same bytes.
  body         text NOT NULL,
  created_at   timestamptz NOT NULL
);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
  id               text PRIMARY KEY,
  tenant_id        text NOT NULL REFERENCES tenants (id),
  event_id         text NOT NULL REFERENCES webhook_events (id),
  event_type       text NOT NULL,
  subscription_id  text NOT NULL REFERENCES webhook_subscriptions (id),
  status           text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'canceled')),
  attempts         integer NOT NULL DEFAULT 0,
  cycle_attempts   integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz,
  locked_by        text,
  locked_until     timestamptz,
  http_status      integer,
  failure_code     text,
  delivered_at     timestamptz,
  completed_at     timestamptz,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_completed ON webhook_deliveries (completed_at) WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
  id            bigserial PRIMARY KEY,
  delivery_id   text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  tenant_id     text NOT NULL,
  attempted_at  timestamptz NOT NULL,
  duration_ms   integer NOT NULL,
  http_status   integer,
  failure_code  text,
  error         text
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
