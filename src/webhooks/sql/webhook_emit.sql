-- The outbox write of emit() (src/webhooks/events.ts): the event and its fan-out to one pending delivery per
-- matching active subscription of the tenant whose owning key may receive it (api_key_grants with the event's read
-- scope or the matching write scope). Returns how many deliveries were written.
CREATE OR REPLACE FUNCTION webhook_emit(p_tenant_id text, p_event_id text, p_type text, p_at timestamptz, p_body text, p_read_scope text, p_write_scope text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  fanned_out integer;
BEGIN
  INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at) VALUES (p_event_id, p_tenant_id, p_type, p_at, p_body, p_at);
  INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, next_attempt_at, created_at, updated_at)
  SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), s.tenant_id, p_event_id, p_type, s.id, 'pending', p_at, p_at, p_at
  FROM webhook_subscriptions s
  JOIN api_keys k ON k.id = s.owner_api_key_id
  WHERE s.tenant_id = p_tenant_id AND s.active AND s.deleted_at IS NULL AND p_type = ANY (s.events)
    AND api_key_grants(k.revoked_at, k.expires_at, k.scopes, p_at, ARRAY[p_read_scope, p_write_scope]);
  GET DIAGNOSTICS fanned_out = ROW_COUNT;
  RETURN fanned_out;
END
$$;
