-- Foundation: tenants and their credentials, operators, properties, channels, jobs, idempotency.

CREATE TABLE app_secrets (
  name        text PRIMARY KEY,
  value       text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tenants (
  id               text PRIMARY KEY,
  name             text NOT NULL,
  timezone         text NOT NULL DEFAULT 'UTC',
  sales_available  boolean NOT NULL DEFAULT false,
  sales_published  boolean NOT NULL DEFAULT false,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);

CREATE TABLE api_keys (
  id          text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (id),
  name        text NOT NULL,
  -- SHA-256 of the whole key: keys carry 256 bits of entropy, so a fast hash is enough.
  key_hash    text NOT NULL UNIQUE,
  key_prefix  text NOT NULL,
  scopes      text[] NOT NULL,
  expires_at  timestamptz,
  revoked_at  timestamptz,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);

CREATE TABLE operators (
  id            text PRIMARY KEY CHECK (length(id) = 24),
  tenant_id     text NOT NULL REFERENCES tenants (id),
  display_name  text NOT NULL,
  email         text NOT NULL,
  active        boolean NOT NULL DEFAULT true,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL
);
CREATE INDEX operators_tenant ON operators (tenant_id, created_at);

CREATE TABLE properties (
  id          text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (id),
  name        text NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX properties_tenant ON properties (tenant_id);

CREATE TABLE channels (
  id            text PRIMARY KEY,
  tenant_id     text NOT NULL REFERENCES tenants (id),
  kind          text NOT NULL CHECK (kind IN ('whatsapp', 'instagram', 'messenger', 'webchat')),
  name          text NOT NULL,
  phone_number  text,
  available     boolean NOT NULL DEFAULT true,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL
);
CREATE INDEX channels_tenant ON channels (tenant_id, kind);

CREATE TABLE channel_templates (
  tenant_id      text NOT NULL REFERENCES tenants (id),
  channel_id     text NOT NULL REFERENCES channels (id),
  template_name  text NOT NULL,
  category       text NOT NULL,
  locales        jsonb NOT NULL,
  updated_at     timestamptz NOT NULL,
  PRIMARY KEY (channel_id, template_name)
);

-- Durable jobs: enqueued in the writer's transaction, claimed with a lease.
CREATE TABLE jobs (
  id            bigserial PRIMARY KEY,
  task          text NOT NULL,
  tenant_id     text,
  payload       jsonb NOT NULL DEFAULT '{}'::jsonb,
  dedupe_key    text,
  state         text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
  run_at        timestamptz NOT NULL,
  attempts      integer NOT NULL DEFAULT 0,
  max_attempts  integer NOT NULL DEFAULT 10,
  locked_by     text,
  locked_until  timestamptz,
  last_error    text,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  finished_at   timestamptz
);
CREATE UNIQUE INDEX jobs_dedupe ON jobs (task, dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'running');
CREATE INDEX jobs_due ON jobs (run_at) WHERE state = 'queued';
CREATE INDEX jobs_leased ON jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state IN ('succeeded', 'failed');

-- Stored first responses of idempotent requests, replayed for 24 hours.
CREATE TABLE idempotency_keys (
  tenant_id        text NOT NULL REFERENCES tenants (id),
  operation        text NOT NULL,
  key              text NOT NULL,
  request_hash     text NOT NULL,
  state            text NOT NULL CHECK (state IN ('in_progress', 'completed')),
  response_status  integer,
  response_body    jsonb,
  locked_at        timestamptz NOT NULL,
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, operation, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
