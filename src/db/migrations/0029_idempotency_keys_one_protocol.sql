-- Idempotency-Keys have one protocol (src/platform/sql/idempotency_claim.sql): the key's advisory lock held by the
-- transaction that runs the request, and a row written only with its answer. No version since 0021 writes an
-- in-progress claim; one left by an older node belongs to a request that ended long ago, so it goes, with the
-- columns that described claims.
DELETE FROM idempotency_keys WHERE state <> 'completed';
ALTER TABLE idempotency_keys DROP COLUMN state, DROP COLUMN locked_at;
ALTER TABLE idempotency_keys ALTER COLUMN response_status SET NOT NULL, ALTER COLUMN response_body SET NOT NULL;

-- Keys are named by the operation's operationId, as creates always were: the names services chose for the three
-- operations that ran their own keys are renamed, so a retry across the upgrade still replays its answer.
UPDATE idempotency_keys SET operation = CASE operation
  WHEN 'conversations.reply' THEN 'replyToConversation'
  WHEN 'conversations.start' THEN 'startConversation'
  WHEN 'crm.follow-up.send' THEN 'sendFollowUp'
END
WHERE operation IN ('conversations.reply', 'conversations.start', 'crm.follow-up.send');

-- A reply's claim no longer carries the channel's window (reply_window decides it) or a staleness limit.
ALTER TYPE reply_claim DROP ATTRIBUTE window_hours, DROP ATTRIBUTE stale_before;
