-- Reservations: property-management integrations, mirrored provider reservations, and the
-- guest-messaging lifecycle (settings per integration and event, attempts as diagnostics).

CREATE TABLE integrations (
  id          text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (id),
  provider    text NOT NULL CHECK (provider IN ('pms')),
  name        text NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
CREATE INDEX integrations_tenant ON integrations (tenant_id, created_at, id);

-- One mirror per provider reservation. Dates are calendar dates of the property (no time zone).
CREATE TABLE reservation_mirrors (
  id                       text PRIMARY KEY,
  tenant_id                text NOT NULL REFERENCES tenants (id),
  integration_id           text NOT NULL REFERENCES integrations (id),
  provider_reservation_id  text NOT NULL,
  status                   text NOT NULL,
  property_id              text REFERENCES properties (id),
  check_in_date            date NOT NULL,
  check_out_date           date NOT NULL,
  booked_at                timestamptz NOT NULL,
  guest_full_name          text NOT NULL,
  guest_email              text,
  guest_phone_raw          text,
  -- E.164 form of guest_phone_raw; null when absent or not a valid international number.
  guest_phone_e164         text,
  source_updated_at        timestamptz,
  source_freshness_at      timestamptz NOT NULL,
  last_synced_at           timestamptz NOT NULL,
  -- The pre_checkin schedule's progress for the current check-in date: deferred (seen, not yet due) or done.
  pre_checkin_for          date,
  pre_checkin_state        text CHECK (pre_checkin_state IN ('deferred', 'done')),
  created_at               timestamptz NOT NULL,
  updated_at               timestamptz NOT NULL,
  UNIQUE (tenant_id, integration_id, provider_reservation_id),
  CHECK (check_out_date >= check_in_date)
);
-- The list's two sorts (keyset on value, id), with and without the integration filter.
CREATE INDEX reservation_mirrors_check_in ON reservation_mirrors (tenant_id, check_in_date, id);
CREATE INDEX reservation_mirrors_booked ON reservation_mirrors (tenant_id, booked_at, id);
CREATE INDEX reservation_mirrors_integration_check_in ON reservation_mirrors (tenant_id, integration_id, check_in_date, id);
CREATE INDEX reservation_mirrors_integration_booked ON reservation_mirrors (tenant_id, integration_id, booked_at, id);
-- Conversation-linked reservations match on the normalised guest phone.
CREATE INDEX reservation_mirrors_guest_phone ON reservation_mirrors (tenant_id, guest_phone_e164, check_in_date DESC) WHERE guest_phone_e164 IS NOT NULL;
-- The hourly pre_checkin scan looks only at confirmed stays.
CREATE INDEX reservation_mirrors_confirmed ON reservation_mirrors (check_in_date, id) WHERE status = 'confirmed';

CREATE TABLE lifecycle_settings (
  tenant_id       text NOT NULL REFERENCES tenants (id),
  integration_id  text NOT NULL REFERENCES integrations (id),
  event_type      text NOT NULL CHECK (event_type IN ('booking_confirmed', 'pre_checkin', 'post_checkout_review')),
  enabled         boolean NOT NULL DEFAULT false,
  channel_id      text REFERENCES channels (id),
  updated_at      timestamptz NOT NULL,
  PRIMARY KEY (integration_id, event_type)
);
CREATE INDEX lifecycle_settings_tenant ON lifecycle_settings (tenant_id);

-- Every evaluation of a lifecycle event for a reservation. Diagnostics, not delivery receipts.
CREATE TABLE lifecycle_attempts (
  id                 bigserial PRIMARY KEY,
  tenant_id          text NOT NULL REFERENCES tenants (id),
  reservation_id     text NOT NULL REFERENCES reservation_mirrors (id),
  event_type         text NOT NULL CHECK (event_type IN ('booking_confirmed', 'pre_checkin', 'post_checkout_review')),
  result             text NOT NULL CHECK (result IN ('would_send', 'deferred', 'skipped', 'invalid', 'duplicate', 'error')),
  reason             text NOT NULL,
  trigger_source     text NOT NULL,
  attempt_count      integer NOT NULL,
  duplicate_count    integer NOT NULL DEFAULT 0,
  sender_channel_id  text,
  sender_phone       text,
  sender_label       text,
  conversation_id    text REFERENCES conversations (id),
  request_event_id   text,
  created_at         timestamptz NOT NULL
);
CREATE INDEX lifecycle_attempts_reservation ON lifecycle_attempts (tenant_id, reservation_id, event_type, id DESC);
-- At most one send per reservation and event: a second would_send cannot commit.
CREATE UNIQUE INDEX lifecycle_attempts_one_send ON lifecycle_attempts (reservation_id, event_type) WHERE result = 'would_send';
