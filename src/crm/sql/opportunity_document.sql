-- An opportunity as the public API writes it: exactly the bytes the response serializer writes for the Opportunity
-- schema (its required fields in the schema's order, then conversationId when known; strings escaped as JSON does).
-- Stored with each row (migration 0040), so a page splices its rows' documents instead of reading, converting and
-- serialising every field on every read. Arguments only: IMMUTABLE, as a generated column requires. Changing this
-- changes new and updated rows only, so such a change comes with a migration that recomputes the column.
CREATE OR REPLACE FUNCTION opportunity_document(
  id text, lead_id text, conversation_id text, stage text, status text, revision integer, created_at timestamptz, updated_at timestamptz
) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT '{"opportunityId":' || to_json(id) || ',"leadId":' || to_json(lead_id) || ',"stage":' || to_json(stage)
    || ',"status":' || to_json(status) || ',"revision":' || revision
    || ',"createdAt":"' || iso_millis(created_at) || '","updatedAt":"' || iso_millis(updated_at) || '"'
    || coalesce(',"conversationId":' || to_json(conversation_id), '') || '}'
$$;
