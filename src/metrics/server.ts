import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Metrics } from './prometheus.js';

/** The scrape endpoint: `GET /metrics` on its own port, apart from the public API. */
export async function startMetricsServer(metrics: Metrics, host: string, port: number, log: Logger): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found; metrics are at GET /metrics\n');
      return;
    }
    metrics
      .scrape()
      .then((body) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body))
      .catch((error: unknown) => {
        log.warn({ err: error }, 'metrics collection failed');
        response.writeHead(503, { 'content-type': 'text/plain' }).end('metrics unavailable\n');
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
