import { M2MClient } from '../index.js';
import type { CliConfig } from './config.js';
import { UsageError } from './errors.js';

export function apiKey(config: CliConfig): string {
  if (!config.apiKey) throw new UsageError('M2M_API_KEY is not set (an API key of the tenant; `m2m dev` prints one)');
  return config.apiKey;
}

export function publicClient(config: CliConfig): M2MClient {
  return new M2MClient({ apiKey: apiKey(config), baseUrl: config.baseUrl });
}
