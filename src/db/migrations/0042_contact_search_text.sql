-- A contact search matches the contact's own text (name, phone digits, handle), kept on the contact: every message
-- updates its conversation's row, and a trigram index on that row made each of those updates re-index text that
-- changes only with the contact. The list joins the matching contacts to their conversations.
ALTER TABLE contacts ADD COLUMN search_text text NOT NULL DEFAULT '';
UPDATE contacts ct SET search_text = c.search_text
FROM (SELECT DISTINCT ON (contact_id) contact_id, search_text FROM conversations ORDER BY contact_id, updated_at DESC) c
WHERE c.contact_id = ct.id;
-- Contacts without a conversation: the same text in SQL (the application writes it from now on).
UPDATE contacts SET search_text = concat_ws(' ', lower(nullif(name, '')), nullif(regexp_replace(coalesce(phone_e164, ''), '\D', '', 'g'), ''), lower(nullif(handle, '')))
WHERE search_text = '' AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.contact_id = contacts.id);
CREATE INDEX contacts_search ON contacts USING gin (search_text public.gin_trgm_ops);
DROP INDEX conversations_search;
ALTER TABLE conversations DROP COLUMN search_text;
