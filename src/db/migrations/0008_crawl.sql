-- Website crawling: crawl jobs (run by the job runner as task knowledge.crawl), content hashes on crawled pages
-- (unchanged pages reuse their chunks) and embedding vectors on chunks.

CREATE TABLE knowledge_crawl_jobs (
  id                 text PRIMARY KEY,
  tenant_id          text NOT NULL REFERENCES tenants (id),
  website_id         text NOT NULL REFERENCES knowledge_websites (id),
  -- The staging generation this crawl writes. Kept (as an id) after a failed crawl discarded it.
  generation_id      text NOT NULL,
  -- The jobs row that runs it: a crawl whose runner job has ended without finishing the crawl is failed on read.
  runner_job_id      bigint,
  status             text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'completed', 'failed')),
  phase              text NOT NULL DEFAULT 'queued' CHECK (phase IN ('queued', 'crawling', 'embedding', 'finalizing')),
  url                text NOT NULL,
  crawl_depth        integer NOT NULL,
  max_pages          integer NOT NULL,
  pages_discovered   integer NOT NULL DEFAULT 0,
  pages_processed    integer NOT NULL DEFAULT 0,
  pages_failed       integer NOT NULL DEFAULT 0,
  chunks_embedded    integer NOT NULL DEFAULT 0,
  chunks             integer,
  snapshot_pages     integer,
  -- Pages that could not be stored (at most 100): [{url, code, message}].
  failed_pages       jsonb NOT NULL DEFAULT '[]'::jsonb,
  error_code         text,
  error_message      text,
  -- Which claim of the runner job is writing (the runner's attempt number): writes of an older run are refused.
  run_attempt        integer NOT NULL DEFAULT 0,
  created_at         timestamptz NOT NULL,
  started_at         timestamptz,
  completed_at       timestamptz,
  updated_at         timestamptz NOT NULL
);
-- One queued or running crawl per website.
CREATE UNIQUE INDEX knowledge_crawl_jobs_one_active ON knowledge_crawl_jobs (website_id) WHERE status IN ('queued', 'running');
CREATE INDEX knowledge_crawl_jobs_tenant ON knowledge_crawl_jobs (tenant_id, created_at DESC, id DESC);
CREATE INDEX knowledge_crawl_jobs_active ON knowledge_crawl_jobs (tenant_id, created_at DESC) WHERE status IN ('queued', 'running');
CREATE INDEX knowledge_crawl_jobs_website ON knowledge_crawl_jobs (website_id, created_at DESC);

-- SHA-256 of a crawled page's extracted text: a recrawl that finds the same text copies the chunks (and vectors).
ALTER TABLE knowledge_sources ADD COLUMN content_hash text;

-- Embedding vectors (no pgvector on PGlite): a plain float4 array and the embedder that made it.
ALTER TABLE knowledge_chunks ADD COLUMN embedding real[];
ALTER TABLE knowledge_chunks ADD COLUMN embedding_model text;
