-- Conversations keep a copy of their contact's name and phone, as they keep search_text: the inbox list then
-- reads one table (joining contacts doubled the planning time of the list statement, which a search pays on
-- every request). Written with the conversation and whenever the contact is renamed; the phone never changes.
ALTER TABLE conversations ADD COLUMN contact_name text, ADD COLUMN contact_phone text;
UPDATE conversations c SET contact_name = ct.name, contact_phone = ct.phone_e164 FROM contacts ct WHERE ct.id = c.contact_id;
