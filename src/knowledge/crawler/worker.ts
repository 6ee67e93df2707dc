import type { WorkCounters } from '../../metrics/counters.js';
import type { Config } from '../../config.js';
import type { Db } from '../../db/driver.js';
import type { JobRunner } from '../../jobs/runner.js';
import type { Resolver } from '../../net/guard.js';
import { LocalEmbedder, RemoteEmbedder, type Embedder } from './embedder.js';
import { CrawlFetcher } from './fetcher.js';
import { registerCrawlJobs } from './job.js';
import { registerRecrawls, scheduleRecrawls } from './recrawl.js';
import type { JobWorker } from '../../jobs/worker.js';
import { tokenizer } from '../tokenizer.js';

/** The embedder the configuration asks for: an OpenAI-compatible endpoint when EMBEDDINGS_URL is set, else the local one. */
export function createEmbedder(config: Pick<Config, 'embeddings'>): Embedder {
  const remote = config.embeddings;
  return remote ? new RemoteEmbedder({ url: remote.url, apiKey: remote.apiKey, model: remote.model, timeoutMs: remote.timeoutMs }) : new LocalEmbedder();
}

/** Registers knowledge.crawl and the recrawl pass (knowledge.recrawl) on the runner with a crawler built from the configuration; close() releases its connections. */
export function createCrawlWorker(runner: JobRunner, db: Db, config: Config, resolver?: Resolver, counters?: WorkCounters): JobWorker {
  const { crawl } = config;
  const fetcher = new CrawlFetcher({
    allowPrivate: config.allowPrivateDestinations,
    timeoutMs: crawl.fetchTimeoutMs,
    maxBytes: crawl.maxPageBytes,
    userAgent: crawl.userAgent,
    connections: crawl.concurrencyPerHost,
    resolver,
  });
  registerCrawlJobs(runner, {
    db,
    embedder: createEmbedder(config),
    counters,
    crawler: {
      fetcher,
      allowPrivate: config.allowPrivateDestinations,
      agentToken: crawl.userAgent.split('/')[0].trim().toLowerCase(),
      concurrencyPerHost: crawl.concurrencyPerHost,
      maxDelayMs: crawl.maxDelayMs,
      maxBytes: crawl.maxPageBytes,
      deadlineMs: crawl.deadlineMs,
    },
  });
  registerRecrawls(runner, { db, intervalMs: crawl.recrawlCheckMs, batch: crawl.recrawlBatch });
  return {
    async schedule(database, clock) {
      await scheduleRecrawls(database, clock);
      // The tokenizer's table is built once the workers run, so the first page a crawl chunks does not wait for it.
      setImmediate(() => {
        try {
          tokenizer();
        } catch {
          // The first chunking meets the same error, inside its job.
        }
      });
    },
    close: () => fetcher.close(),
  };
}
