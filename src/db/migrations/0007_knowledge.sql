-- Knowledge: sources (text, file, url, asset, website and website page rows in one table), their chunks,
-- managed websites with crawl generations (filled by the crawler), and shareable asset folders.

CREATE TABLE knowledge_asset_folders (
  id                   text PRIMARY KEY,
  tenant_id            text NOT NULL REFERENCES tenants (id),
  title                text NOT NULL,
  description          text,
  property_id          text REFERENCES properties (id),
  active               boolean NOT NULL DEFAULT true,
  -- Share links are signed with this version; bumping it revokes every link made before.
  share_token_version  integer NOT NULL DEFAULT 1,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL
);
CREATE INDEX knowledge_asset_folders_tenant ON knowledge_asset_folders (tenant_id, created_at);

CREATE TABLE knowledge_websites (
  id                     text PRIMARY KEY,
  tenant_id              text NOT NULL REFERENCES tenants (id),
  -- The website's own row in knowledge_sources (kind 'website'): title, url, scope, active, ordering.
  source_id              text NOT NULL UNIQUE,
  root_url               text NOT NULL,
  normalized_root_url    text NOT NULL,
  crawl_depth            integer NOT NULL CHECK (crawl_depth BETWEEN 1 AND 10),
  max_pages              integer NOT NULL CHECK (max_pages BETWEEN 1 AND 500),
  status                 text NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'crawling', 'failed')),
  default_enabled        boolean NOT NULL DEFAULT true,
  selection_rules        jsonb NOT NULL DEFAULT '[]'::jsonb,
  current_generation_id  text,
  last_crawled_at        timestamptz,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL
);
CREATE INDEX knowledge_websites_tenant ON knowledge_websites (tenant_id, created_at);

CREATE TABLE knowledge_website_generations (
  id            text PRIMARY KEY,
  tenant_id     text NOT NULL REFERENCES tenants (id),
  website_id    text NOT NULL REFERENCES knowledge_websites (id),
  state         text NOT NULL CHECK (state IN ('staging', 'current', 'superseded')),
  created_at    timestamptz NOT NULL,
  completed_at  timestamptz
);
CREATE INDEX knowledge_website_generations_website ON knowledge_website_generations (website_id, created_at);
-- At most one current generation per website.
CREATE UNIQUE INDEX knowledge_website_generations_current ON knowledge_website_generations (website_id) WHERE state = 'current';

CREATE TABLE knowledge_sources (
  id                     text PRIMARY KEY,
  tenant_id              text NOT NULL REFERENCES tenants (id),
  -- text, file, url: standalone sources; asset: an image or document (listed as sourceType file);
  -- website: a managed website's inventory row; website_page: a crawled page (never listed on its own).
  kind                   text NOT NULL CHECK (kind IN ('text', 'file', 'url', 'asset', 'website', 'website_page')),
  title                  text,
  text                   text,
  url                    text,
  active                 boolean NOT NULL DEFAULT true,
  property_id            text REFERENCES properties (id),
  preview                text,
  chunk_count            integer NOT NULL DEFAULT 0,
  -- Tokens of all this source's chunks; activeTokens is this when the source is active, else 0.
  tokens                 integer NOT NULL DEFAULT 0,
  ingest_status          text NOT NULL DEFAULT 'ready' CHECK (ingest_status IN ('pending', 'ready', 'failed')),
  ingest_error           text,
  ingested_at            timestamptz,
  -- Uploaded bytes (file sources and assets) live in the blob store under blob_key.
  blob_key               text,
  file_name              text,
  file_content_type      text,
  file_size              integer,
  uploaded_at            timestamptz,
  -- Assets.
  description            text,
  media_type             text CHECK (media_type IN ('image', 'document')),
  validation_status      text CHECK (validation_status IN ('unsupported', 'pending', 'ready', 'blocked', 'failed')),
  validation_findings    jsonb,
  detected_content_type  text,
  folder_id              text REFERENCES knowledge_asset_folders (id),
  folder_position        integer,
  -- Website pages.
  website_id             text REFERENCES knowledge_websites (id),
  website_generation_id  text REFERENCES knowledge_website_generations (id),
  canonical_url          text,
  path                   text,
  enabled                boolean,
  display_order          integer,
  created_by             jsonb,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  -- What the inventory's `query` matches: title and URL metadata, lowercased.
  search_text            text GENERATED ALWAYS AS (lower(coalesce(title, '') || ' ' || coalesce(url, ''))) STORED
);
-- The inventory: every kind but website pages, newest first (keyset on created_at, id).
CREATE INDEX knowledge_sources_inventory ON knowledge_sources (tenant_id, created_at DESC, id DESC) WHERE kind <> 'website_page';
CREATE INDEX knowledge_sources_search ON knowledge_sources USING gin (search_text public.gin_trgm_ops) WHERE kind <> 'website_page';
CREATE INDEX knowledge_sources_folder ON knowledge_sources (folder_id, folder_position) WHERE folder_id IS NOT NULL;
CREATE INDEX knowledge_sources_website ON knowledge_sources (website_id, website_generation_id) WHERE website_id IS NOT NULL;

ALTER TABLE knowledge_websites ADD CONSTRAINT knowledge_websites_source FOREIGN KEY (source_id) REFERENCES knowledge_sources (id) DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE knowledge_chunks (
  source_id   text NOT NULL REFERENCES knowledge_sources (id) ON DELETE CASCADE,
  seq         integer NOT NULL,
  tenant_id   text NOT NULL,
  text        text NOT NULL,
  tokens      integer NOT NULL,
  PRIMARY KEY (source_id, seq)
);
