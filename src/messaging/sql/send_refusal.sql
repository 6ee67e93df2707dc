-- Whether a message may be sent, and if not why: the one statement of the send rules every path applies (a reply
-- in conversation_replies; a conversation start, a follow-up send and a lifecycle send through
-- src/messaging/send-rules.ts). The channel must be available, the contact must not have opted out and, where the
-- path requires it, must have given consent; checked in that order. A null fact is not checked (a caller that has
-- not read it yet). Null when the send is allowed. The customer-service window of free-form replies is reply_window.
CREATE OR REPLACE FUNCTION send_refusal(p_channel_available boolean, p_opted_out boolean, p_consent_required boolean, p_consent boolean)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE
  WHEN NOT p_channel_available THEN 'channel_unavailable'
  WHEN p_opted_out THEN 'recipient_opted_out'
  WHEN p_consent_required AND NOT p_consent THEN 'recipient_no_consent'
END $$;
