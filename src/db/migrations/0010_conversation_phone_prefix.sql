-- A contact search typed as an international number ("+52 55 1234") matches the phones that start with it:
-- a btree prefix scan, where the trigram index would read the posting lists of trigrams that most of a
-- tenant's numbers share (a hotel's guests mostly have its own country and area code).
CREATE INDEX conversations_phone_prefix ON conversations (tenant_id, contact_phone text_pattern_ops);
