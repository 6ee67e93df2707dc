-- The text search configuration a chunk's words are indexed with, and a question is read in: english or spanish
-- when that language's commonest words make up a clear share of the text, else simple (every word as written, no
-- stemming, no stop words). A stop-word count is enough to tell the two languages apart on a paragraph and needs no
-- dictionary; the first 4000 characters decide. IMMUTABLE (the word lists are constants) so that a generated
-- column may call it. Plain PL/pgSQL assignments and a loop, which run without planning a statement: every search
-- calls it for its question.
CREATE OR REPLACE FUNCTION knowledge_text_config(body text) RETURNS regconfig
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  english_words CONSTANT text[] := ARRAY['the', 'and', 'is', 'are', 'of', 'to', 'in', 'for', 'with', 'you', 'your', 'our',
    'we', 'on', 'at', 'from', 'or', 'be', 'can', 'will', 'this', 'that', 'it', 'as', 'by', 'an', 'have', 'has', 'not', 'all'];
  spanish_words CONSTANT text[] := ARRAY['el', 'la', 'los', 'las', 'de', 'del', 'y', 'que', 'en', 'un', 'una', 'por', 'para',
    'con', 'es', 'son', 'se', 'su', 'sus', 'al', 'lo', 'como', 'nuestro', 'nuestra', 'puede', 'pueden', 'desde', 'hasta', 'muy', 'también'];
  english integer := 0;
  spanish integer := 0;
  total integer := 0;
  word text;
BEGIN
  FOREACH word IN ARRAY regexp_split_to_array(lower(left(body, 4000)), '[^[:alpha:]]+') LOOP
    CONTINUE WHEN word = '';
    total := total + 1;
    IF word = ANY (english_words) THEN
      english := english + 1;
    ELSIF word = ANY (spanish_words) THEN
      spanish := spanish + 1;
    END IF;
  END LOOP;
  RETURN CASE
    WHEN total = 0 THEN 'simple'::regconfig
    WHEN english >= spanish AND english * 12 >= total THEN 'english'::regconfig
    WHEN spanish > english AND spanish * 12 >= total THEN 'spanish'::regconfig
    ELSE 'simple'::regconfig
  END;
END
$$;
