/**
 * What the workers report as they go (kept free of prom-client so domain code does not load it).
 * The default does nothing; with METRICS_PORT set the runtime passes the Prometheus-backed one.
 */
export interface WorkCounters {
  /** A webhook attempt's outcome: delivered, retrying (failed, another attempt is scheduled) or failed (gave up). */
  webhookAttempt(outcome: 'delivered' | 'retrying' | 'failed'): void;
  /** A message send job's outcome: sent, retrying (provider error, the job retries) or failed. */
  sendOutcome(outcome: 'sent' | 'retrying' | 'failed'): void;
  /** Pages a finished crawl processed or could not fetch. */
  crawlPages(result: 'processed' | 'failed', count: number): void;
  /** Items of a provider callback: applied, duplicate (a redelivery), unknown_channel (counted, not stored) or skipped (unparsable). */
  callbackItems(provider: string, outcome: 'applied' | 'duplicate' | 'unknown_channel' | 'skipped', count: number): void;
}

export const noWorkCounters: WorkCounters = {
  webhookAttempt: () => undefined,
  sendOutcome: () => undefined,
  crawlPages: () => undefined,
  callbackItems: () => undefined,
};
