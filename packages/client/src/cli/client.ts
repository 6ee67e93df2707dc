import { M2MClient } from '../index.js';
import type { CliConfig } from './config.js';
import { UsageError } from './errors.js';

export function publicClient(config: CliConfig): M2MClient {
  if (!config.apiKey) throw new UsageError('M2M_API_KEY is not set (an API key of the tenant; `m2m dev` prints one)');
  return new M2MClient({ apiKey: config.apiKey, baseUrl: config.baseUrl });
}
