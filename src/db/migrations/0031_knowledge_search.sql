-- Searching the knowledge (issue 44, decisions 7.5): each chunk gets its words as a tsvector in the language its
-- text is written in, and a sign sketch of its vector, both generated from the chunk so that every writer
-- (ingestion, crawls, copies of unchanged pages) fills them and existing chunks are filled here.
-- The two functions the columns are computed by live in src/knowledge/sql/ (knowledge_text_config,
-- knowledge_embedding_signs): migrate applies them just before this migration. Changing one changes how new rows
-- are computed only, so such a change comes with a migration that recomputes the column.

ALTER TABLE knowledge_chunks
  ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (to_tsvector(knowledge_text_config(text), text)) STORED,
  ADD COLUMN embedding_signs varbit GENERATED ALWAYS AS (knowledge_embedding_signs(embedding)) STORED;

CREATE INDEX knowledge_chunks_search ON knowledge_chunks USING gin (search_vector);
-- A tenant's chunks without the source table: the search's vector side scores all of them when they are few.
CREATE INDEX knowledge_chunks_tenant ON knowledge_chunks (tenant_id, source_id, seq);
