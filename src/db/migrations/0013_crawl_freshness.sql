-- Fresh knowledge (issue 23): what a crawl changed, conditional recrawls and scheduled recrawls.

-- A completed crawl's page counts against the previous current generation ({new, changed, same, removed}) and
-- its new, changed and removed pages ([{url, changeStatus}], at most 500).
ALTER TABLE knowledge_crawl_jobs ADD COLUMN changes jsonb;
ALTER TABLE knowledge_crawl_jobs ADD COLUMN changed_pages jsonb NOT NULL DEFAULT '[]'::jsonb;

-- A crawled page's response validators (ETag, Last-Modified as sent) and the links the crawl followed from it:
-- a recrawl asks with If-None-Match / If-Modified-Since and, on 304, reuses the page and its links unread.
ALTER TABLE knowledge_sources ADD COLUMN http_etag text;
ALTER TABLE knowledge_sources ADD COLUMN http_last_modified text;
ALTER TABLE knowledge_sources ADD COLUMN followed_links jsonb;

-- Recrawl schedule: every recrawl_interval_hours (null: never by itself). next_crawl_at is when the workers
-- start the next one (spread by a per-website offset); failed_crawls counts scheduled crawls failed in a row.
ALTER TABLE knowledge_websites ADD COLUMN recrawl_interval_hours integer CHECK (recrawl_interval_hours BETWEEN 1 AND 720);
ALTER TABLE knowledge_websites ADD COLUMN next_crawl_at timestamptz;
ALTER TABLE knowledge_websites ADD COLUMN failed_crawls integer NOT NULL DEFAULT 0;
CREATE INDEX knowledge_websites_due ON knowledge_websites (next_crawl_at) WHERE next_crawl_at IS NOT NULL;
