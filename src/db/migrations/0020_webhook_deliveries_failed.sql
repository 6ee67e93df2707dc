-- POST /webhooks/{id}/recover reads a subscription's failed deliveries in (created_at, id) order, 500 a batch, each
-- batch after the previous one's last. Without an index of those rows the planner read every completed delivery of
-- every subscription (webhook_deliveries_completed) and sorted them, per batch: 200 ms a batch with 100,000 failed
-- deliveries. Only failed rows are in this index: a delivery enters it when it fails and leaves it when restarted.
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (subscription_id, created_at, id) WHERE status = 'failed';
