-- CRM: leads, opportunities (revisioned), follow-ups with send claims, and automation settings.

CREATE TABLE leads (
  id               text PRIMARY KEY,
  tenant_id        text NOT NULL REFERENCES tenants (id),
  name             text NOT NULL,
  phone_e164       text,
  conversation_id  text REFERENCES conversations (id),
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX leads_tenant ON leads (tenant_id, created_at);

CREATE TABLE opportunities (
  id               text PRIMARY KEY,
  tenant_id        text NOT NULL REFERENCES tenants (id),
  lead_id          text NOT NULL REFERENCES leads (id),
  conversation_id  text REFERENCES conversations (id),
  stage            text NOT NULL,
  status           text NOT NULL,
  revision         integer NOT NULL DEFAULT 1,
  last_follow_up_at timestamptz,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX opportunities_lead ON opportunities (tenant_id, lead_id, created_at DESC);

CREATE TABLE follow_ups (
  id                text PRIMARY KEY,
  tenant_id         text NOT NULL REFERENCES tenants (id),
  lead_id           text NOT NULL REFERENCES leads (id),
  opportunity_id    text REFERENCES opportunities (id),
  conversation_id   text NOT NULL REFERENCES conversations (id),
  channel_kind      text NOT NULL,
  status            text NOT NULL CHECK (status IN ('pending', 'scheduled', 'sending', 'sent', 'dismissed', 'canceled', 'expired', 'failed')),
  mode              text NOT NULL CHECK (mode IN ('draft', 'auto')),
  reason_code       text NOT NULL,
  reason_text       text,
  message_draft     text,
  draft_status      text NOT NULL CHECK (draft_status IN ('empty', 'generated', 'edited')),
  due_at            timestamptz,
  expires_at        timestamptz NOT NULL,
  -- The send claim: null (unclaimed), active (a send is being queued) or completed (a send was accepted).
  claim_state       text CHECK (claim_state IN ('active', 'completed')),
  claimed_at        timestamptz,
  sent_at           timestamptz,
  reply_id          text,
  request_event_id  text,
  feedback_reason   text,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL
);
CREATE INDEX follow_ups_list ON follow_ups (tenant_id, created_at DESC, id DESC);
CREATE INDEX follow_ups_due ON follow_ups (tenant_id, due_at) WHERE status IN ('pending', 'scheduled');

CREATE TABLE crm_settings (
  tenant_id               text PRIMARY KEY REFERENCES tenants (id),
  follow_up_mode          text NOT NULL DEFAULT 'off' CHECK (follow_up_mode IN ('off', 'draft', 'auto')),
  follow_up_level         text NOT NULL DEFAULT 'balanced' CHECK (follow_up_level IN ('light', 'balanced', 'proactive')),
  follow_up_instructions  text,
  quiet_start             text,
  quiet_end               text,
  updated_at              timestamptz NOT NULL
);
