/**
 * Scenario 6's `/healthz` prober (bench/abuse.ts) in a process of its own, so that its timings hold the server's
 * answer and not also the waits of the bench's event loop, which drives autocannon's 64 connections:
 * `node --import tsx bench/prober.ts BASE_URL`, forked with an IPC channel. It sends `'started'`, probes
 * `GET /healthz` every 20 ms on one kept-alive connection, and on `'stop'` sends its ProbeStats.
 */
import http from 'node:http';
import { pathToFileURL } from 'node:url';
import { percentile, round, sleep } from './lib.js';

export interface ProbeStats {
  p99: number;
  max: number;
  failures: number;
}

async function main(): Promise<void> {
  const [base] = process.argv.slice(2);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let failures = 0;
  let running = true;
  process.once('message', () => {
    running = false;
  });
  process.send?.('started');
  while (running) {
    const started = performance.now();
    await new Promise<void>((resolve) => {
      const req = http.get(`${base}/healthz`, { agent, timeout: 10_000 }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) latencies.push(performance.now() - started);
          else failures += 1;
          resolve();
        });
      });
      req.on('error', () => {
        failures += 1;
        resolve();
      });
      req.on('timeout', () => req.destroy());
    });
    await sleep(20);
  }
  agent.destroy();
  const sorted = latencies.sort((a, b) => a - b);
  const stats: ProbeStats = { p99: round(percentile(sorted, 99), 1), max: round(sorted[sorted.length - 1] ?? Number.NaN, 1), failures };
  process.send?.(stats, () => process.exit(0));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
