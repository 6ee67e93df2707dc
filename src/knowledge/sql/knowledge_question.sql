-- A search question's full-text queries. Its language is read as a chunk's is (knowledge_text_config): an English
-- question is matched as English lexemes, a Spanish one as Spanish lexemes, one whose words do not tell (a few
-- nouns: "late checkout") as both. One row, or none when a language it is read in leaves no lexeme (only stop
-- words, punctuation, emoji): then it finds nothing.
--   every_word: every lexeme of one of its languages (the languages OR'ed);
--   but_one:    every lexeme but one (either of two, ...; the lexeme itself of a one-word language) of one of its
--               languages; any of them for a language of more than 8 (so many rarely all but one match, and the
--               query would grow with the square of the lexemes);
--   any_word:   any of its lexemes;
--   terms:      each lexeme as a query of its own, in lexeme order;
--   languages:  a letter per term telling whose lexeme it is: e English, s Spanish, b both.
-- Lexemes are taken as a stripped tsvector prints them: quoted and escaped as a tsquery reads them, never parsed as
-- operators. Plain assignments only, which PL/pgSQL evaluates without planning a statement: this runs on every search.
CREATE OR REPLACE FUNCTION knowledge_question(question text)
RETURNS TABLE (every_word tsquery, but_one tsquery, any_word tsquery, terms tsquery[], languages text)
LANGUAGE plpgsql STABLE ROWS 1
AS $$
DECLARE
  config regconfig := knowledge_text_config(question);
  read_english boolean := config <> 'spanish'::regconfig;
  read_spanish boolean := config <> 'english'::regconfig;
  english_vector tsvector := CASE WHEN read_english THEN strip(to_tsvector('english', question)) ELSE ''::tsvector END;
  spanish_vector tsvector := CASE WHEN read_spanish THEN strip(to_tsvector('spanish', question)) ELSE ''::tsvector END;
  english_words text[] := string_to_array(english_vector::text, ' ');
  spanish_words text[] := string_to_array(spanish_vector::text, ' ');
  all_words text[] := string_to_array((english_vector || spanish_vector)::text, ' ');
  every text[] := '{}';
  omitted text[] := '{}';
  words text[];
BEGIN
  IF (read_english AND cardinality(english_words) = 0) OR (read_spanish AND cardinality(spanish_words) = 0) THEN RETURN; END IF;
  FOR language IN 1 .. 2 LOOP
    words := CASE language WHEN 1 THEN english_words ELSE spanish_words END;
    CONTINUE WHEN cardinality(words) = 0;
    every := every || ('(' || array_to_string(words, ' & ') || ')');
    IF cardinality(words) > 8 THEN
      omitted := omitted || ('(' || array_to_string(words, ' | ') || ')');
      CONTINUE;
    END IF;
    FOR i IN 1 .. cardinality(words) LOOP
      omitted := omitted || ('(' || CASE WHEN cardinality(words) = 1 THEN words[1] ELSE array_to_string(words[:i - 1] || words[i + 1:], ' & ') END || ')');
    END LOOP;
  END LOOP;
  every_word := array_to_string(every, ' | ')::tsquery;
  but_one := array_to_string(omitted, ' | ')::tsquery;
  any_word := array_to_string(all_words, ' | ')::tsquery;
  terms := all_words::tsquery[];
  languages := '';
  FOR i IN 1 .. cardinality(all_words) LOOP
    languages := languages || CASE WHEN NOT all_words[i] = ANY (spanish_words) THEN 'e' WHEN NOT all_words[i] = ANY (english_words) THEN 's' ELSE 'b' END;
  END LOOP;
  RETURN NEXT;
END
$$;
