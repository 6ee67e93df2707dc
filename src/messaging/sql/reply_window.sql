-- The customer-service window of a free-form (non-template) reply: how long after the contact's last inbound
-- message one may be sent, per channel kind (WhatsApp's customer-service window and Meta's standard messaging
-- window on Messenger and Instagram: 24 hours; webchat is our own widget: none), when it closed or closes, and
-- whether it is open at p_at. No inbound message yet: closed. Hours null: the channel has no window.
-- p_provider_closed_at: the provider said the window is closed (WhatsApp 131047) at that time; it closes the
-- window opened by inbound messages up to then, and a later inbound message opens a new one.
-- Declared as a table of one row, so that the planner inlines it into the statement that joins it (a function
-- returning one record is called once per row instead). It changed from OUT parameters, so the old one goes first.
DROP FUNCTION IF EXISTS reply_window(text, timestamptz, timestamptz, timestamptz);
CREATE OR REPLACE FUNCTION reply_window(p_channel_kind text, p_last_inbound timestamptz, p_provider_closed_at timestamptz, p_at timestamptz)
RETURNS TABLE (hours integer, closed_at timestamptz, open boolean)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT w.hours, e.closes, w.hours IS NULL OR (p_last_inbound IS NOT NULL AND p_at < e.closes)
      FROM (SELECT CASE WHEN p_channel_kind IN ('whatsapp', 'messenger', 'instagram') THEN 24 END AS hours) w
      CROSS JOIN LATERAL (SELECT CASE WHEN p_provider_closed_at >= p_last_inbound
                                      THEN LEAST(p_provider_closed_at, p_last_inbound + make_interval(hours => w.hours))
                                      ELSE p_last_inbound + make_interval(hours => w.hours) END AS closes) e $$;
