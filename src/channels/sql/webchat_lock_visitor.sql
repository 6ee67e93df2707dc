-- Serialises the writers of one webchat visitor's stream for the rest of the transaction (decisions 7.3): every
-- writer takes it before its first insert into webchat_events, so the visitor's event ids commit in the order they
-- were given and a reader resuming after an id never skips one committed later.
CREATE OR REPLACE FUNCTION webchat_lock_visitor(p_visitor_id text)
RETURNS void LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtextextended('webchat|' || p_visitor_id, 0));
$$;
