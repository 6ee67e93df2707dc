-- Sitemap lastmod on recrawls (issue 23): when the site last confirmed a crawled page's content (the request of
-- a 200 or a 304 answer). A recrawl carries a page over unrequested when the sitemap's <lastmod> for it is not
-- newer; a page carried that way keeps this time. Null (pages crawled before): always requested.
ALTER TABLE knowledge_sources ADD COLUMN http_fetched_at timestamptz;
