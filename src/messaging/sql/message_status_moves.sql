-- The moves of a message request's status: only forward (queued → sent → delivered → read), and failed can
-- follow any state but read; a move to the same state, or out of failed, is no move. Late or repeated provider
-- callbacks are therefore ignored, so out-of-order delivery from the provider is harmless. Every status write
-- goes through this (message_sends_accepted; message_status_apply for every other move).
CREATE OR REPLACE FUNCTION message_status_moves(p_from text, p_to text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_from <> p_to AND p_from <> 'failed' AND CASE p_to
  WHEN 'failed' THEN p_from <> 'read'
  ELSE array_position(ARRAY['queued', 'sent', 'delivered', 'read'], p_to) > array_position(ARRAY['queued', 'sent', 'delivered', 'read'], p_from)
END $$;
