-- The knowledge search's full-text index holds the tenant too (issue 44): a search names its tenant, and with the
-- words alone the index answers every tenant's chunks holding them, which the search then reads from the table
-- only to drop, or which the planner intersects with a bitmap of all the tenant's chunks. With tenant_id in the
-- GIN index (btree_gin gives text a GIN operator class) one index scan yields only the tenant's matches.
CREATE EXTENSION IF NOT EXISTS btree_gin WITH SCHEMA public;

DROP INDEX knowledge_chunks_search;
CREATE INDEX knowledge_chunks_search ON knowledge_chunks USING gin (tenant_id, search_vector);
