-- Each opportunity carries its public JSON document, generated from the row so that every writer (create, stage
-- and status changes, follow-up touches) keeps it current and existing rows are filled here. Lists and reads send
-- the stored documents as they are (docs/decisions.md, "Stored bytes are the answer"). The function lives in
-- src/crm/sql/opportunity_document.sql (with iso_millis from src/platform/sql/): migrate applies them just before.
ALTER TABLE opportunities
  ADD COLUMN document text NOT NULL GENERATED ALWAYS AS (opportunity_document(id, lead_id, conversation_id, stage, status, revision, created_at, updated_at)) STORED;
