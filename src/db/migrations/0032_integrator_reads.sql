-- What an integrator reads and records with a key alone (decisions 7.4).

-- Consent as a business records it: where the opt-in was collected and when; opt-out's time.
ALTER TABLE contacts ADD COLUMN consent_source text;
ALTER TABLE contacts ADD COLUMN consent_granted_at timestamptz;
ALTER TABLE contacts ADD COLUMN opted_out_at timestamptz;

-- A handoff's resolution note (public resolve); the latest handoff of a conversation.
ALTER TABLE handoffs ADD COLUMN resolution_note text;
CREATE INDEX handoffs_conversation ON handoffs (conversation_id, opened_at DESC, id DESC);

-- Keyset lists of leads and opportunities, newest first.
CREATE INDEX leads_list ON leads (tenant_id, created_at DESC, id DESC);
CREATE INDEX opportunities_list ON opportunities (tenant_id, created_at DESC, id DESC);
CREATE INDEX opportunities_conversation ON opportunities (tenant_id, conversation_id, created_at DESC, id DESC) WHERE conversation_id IS NOT NULL;
CREATE INDEX leads_conversation ON leads (tenant_id, conversation_id) WHERE conversation_id IS NOT NULL;
CREATE INDEX leads_phone ON leads (tenant_id, phone_e164) WHERE phone_e164 IS NOT NULL;

-- A reservation's attempts across event types, and the tenant's receipts (would_send attempts), newest first.
CREATE INDEX lifecycle_attempts_newest ON lifecycle_attempts (tenant_id, reservation_id, id DESC);
CREATE INDEX lifecycle_attempts_receipts ON lifecycle_attempts (tenant_id, id DESC) WHERE result = 'would_send';
