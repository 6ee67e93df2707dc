-- The admin API acts as itself: what it changes (owner, handoffs) is recorded with actor type 'admin', not
-- 'system', which is kept for workers and schedules.
ALTER TABLE conversation_activity DROP CONSTRAINT conversation_activity_actor_type_check;
ALTER TABLE conversation_activity ADD CONSTRAINT conversation_activity_actor_type_check
  CHECK (actor_type IN ('api_key', 'operator', 'admin', 'system', 'contact'));
