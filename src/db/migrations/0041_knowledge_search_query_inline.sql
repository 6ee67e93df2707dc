-- The knowledge search writes its candidate levels' full-text queries in its own statement (issue 44): the SQL
-- function that wrote them was planned again on every call, three times per search. It has no other caller.
DROP FUNCTION IF EXISTS knowledge_search_query(text, text);
DELETE FROM schema_functions WHERE name = 'knowledge_search_query';
