import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import type { Clock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import type { Resolver } from '../../src/net/guard.js';
import { isolatedDatabase } from './db.js';

export const ADMIN_TOKEN = 'test-admin-token';

export interface TestApp {
  runtime: Runtime;
  /** Calls the admin API; throws unless the status is 2xx. */
  admin<T = Record<string, unknown>>(method: string, url: string, body?: unknown): Promise<T>;
  /** Raw admin call. */
  adminRaw(method: string, url: string, body?: unknown): Promise<LightMyRequestResponse>;
  /** Calls the public API with a bearer key. */
  api(key: string | undefined, method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** A new tenant with one key holding `scopes`. */
  tenantWithKey(scopes: string[]): Promise<{ tenantId: string; key: string; apiKeyId: string }>;
  /** The database env this app runs on (pass as `sameDatabaseAs` to start a second node on it; PostgreSQL only). */
  databaseEnv: Record<string, string>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  clock?: Clock;
  resolver?: Resolver;
  startWorkers?: boolean;
  /** Run on another app's database instead of a fresh one (a second node; the first app drops it). */
  sameDatabaseAs?: TestApp;
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const database = options.sameDatabaseAs
    ? { env: options.sameDatabaseAs.databaseEnv, drop: async () => undefined }
    : await isolatedDatabase();
  const config = loadConfig(
    {
      ADMIN_TOKEN,
      RATE_LIMIT_RPS: '100000',
      RATE_LIMIT_BURST: '100000',
      JOB_POLL_INTERVAL_MS: '50',
      ...database.env,
      ...options.env,
    },
    [],
  );
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const runtime = await createRuntime(config, { clock: options.clock, logger, resolver: options.resolver });
  if (options.startWorkers) await runtime.startWorkers();

  const adminRaw = (method: string, url: string, body?: unknown) =>
    runtime.app.inject({
      method: method as 'GET',
      url: `/admin/v1${url}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
    });

  const admin = async <T>(method: string, url: string, body?: unknown): Promise<T> => {
    const response = await adminRaw(method, url, body);
    if (response.statusCode >= 300) throw new Error(`admin ${method} ${url} → ${response.statusCode} ${response.body}`);
    return response.json() as T;
  };

  return {
    runtime,
    admin,
    adminRaw,
    api: (key, method, url, body, headers = {}) =>
      runtime.app.inject({
        method: method as 'GET',
        url: `/m2m/v1${url}`,
        headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
        ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
      }),
    async tenantWithKey(scopes) {
      const tenant = await admin<{ tenantId: string }>('POST', '/tenants', { name: 'Test Hotel' });
      const key = await admin<{ key: string; apiKeyId: string }>('POST', `/tenants/${tenant.tenantId}/api-keys`, { name: 'test', scopes });
      return { tenantId: tenant.tenantId, key: key.key, apiKeyId: key.apiKeyId };
    },
    databaseEnv: database.env,
    async close() {
      await runtime.close(2_000);
      await database.drop();
    },
  };
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes. */
export async function eventually<T>(check: () => Promise<T | undefined | false>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
