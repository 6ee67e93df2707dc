import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig } from './config.js';
import { openDatabase } from './db/open.js';

/** What closing takes besides the grace of running work (connections, pools), at most. */
const SHUTDOWN_SLACK_MS = 10_000;

/** What a first `npm start` tells whoever holds no key yet. */
const noAdminTokenHint = (origin: string) =>
  'no ADMIN_TOKEN, so the admin API (/admin/v1) is off and no API key can be created here. ' +
  'For a local demo with a key: npx m2m dev. To provision your own: restart with ADMIN_TOKEN=<secret>, then ' +
  'M2M_ADMIN_TOKEN=<secret> npx m2m admin tenants create --name <name>, and ' +
  'npx m2m admin keys create --tenant <tenantId> --scopes <a,b>. ' +
  `API reference: ${origin}/m2m/v1/docs`;

function listeningOrigin(address: string | AddressInfo | null): string {
  if (address === null || typeof address === 'string') return '';
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/** CLI entry: `npm start [-- --role api|worker|all]`. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`configuration error: ${error.message}`);
      process.exit(2);
    }
    throw error;
  }
  // The database is opened and migrated while the rest of the code loads: the one waits on the database, the
  // other on the CPU, so a start takes the longer of the two instead of their sum.
  const database = openDatabase(config);
  database.catch(() => undefined); // reported when createRuntime awaits it
  const { createLogger, createRuntime } = await import('./runtime.js');
  const log = createLogger(config.logLevel);
  const runtime = await createRuntime(config, { logger: log, database });
  // Listening first: the workers' first polls then do not hold the connections a readiness probe needs.
  if (config.role !== 'worker') {
    await runtime.app.listen({ host: config.host, port: config.port });
  } else {
    await runtime.app.ready();
  }
  if (config.role !== 'api') await runtime.startWorkers();
  log.info({ role: config.role, database: config.databaseUrl ? 'postgres' : 'pglite' }, 'started');
  // Without an admin token nobody can create a tenant or a key on this server: say how to get one.
  if (!config.adminToken && config.role !== 'worker') log.info(noAdminTokenHint(listeningOrigin(runtime.app.server.address())));

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    // A part that still hangs past the grace and the slack is named, and the process ends anyway (its leases
    // expire and other nodes take the work over).
    setTimeout(() => {
      log.error({ waitingOn: runtime.closing }, 'shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + SHUTDOWN_SLACK_MS).unref();
    runtime
      .close(config.shutdownGraceMs)
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  console.error('fatal:', error instanceof Error ? error.message : error);
  process.exit(1);
});
