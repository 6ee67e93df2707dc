import { request, resolveConfig, type ResolvedClientConfig } from '../request.js';
import { adminBaseUrl, type CliConfig } from './config.js';
import { UsageError } from './errors.js';

/** Calls the admin API (`/admin/v1`) with the same HTTP core as the SDK: retries, timeouts, ApiError. */
export class AdminClient {
  readonly #config: ResolvedClientConfig;

  constructor(config: ResolvedClientConfig) {
    this.#config = config;
  }

  call<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH', path: string, body?: unknown): Promise<T> {
    return request<T>(this.#config, { method, path, body, idempotent: method !== 'POST' });
  }
}

export function adminClient(config: CliConfig): AdminClient {
  if (!config.adminToken) throw new UsageError('M2M_ADMIN_TOKEN is not set (the server\'s ADMIN_TOKEN; `m2m dev` sets one up)');
  const resolved = resolveConfig({ apiKey: config.adminToken, baseUrl: config.baseUrl });
  return new AdminClient({ ...resolved, baseUrl: adminBaseUrl(resolved.baseUrl) });
}
