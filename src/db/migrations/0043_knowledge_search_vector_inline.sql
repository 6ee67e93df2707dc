-- A chunk's words stay in its row (issue 44): the search ranks a level's matches with ts_rank, which reads every
-- match's search_vector. A row too large for a page sends its largest column to the TOAST table, and a long chunk's
-- search_vector is larger than its embedding, so it went there: a second index lookup and heap read for each match
-- ranked. With MAIN storage the embedding (which the search never reads) and then the text go out first. New rows
-- only; rows already written move as they are rewritten.
ALTER TABLE knowledge_chunks ALTER COLUMN search_vector SET STORAGE MAIN;
