import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

/** Where the CLI keeps what must survive a restart: the dev tenant it created and the listener's secret and cursor. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.M2M_STATE_DIR || '.m2m');
}

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080/m2m/v1';

/** What `m2m dev` leaves behind so the other commands work from the same folder without exporting anything. */
export interface DevState {
  baseUrl: string;
  adminToken: string;
  tenantId: string;
  apiKey: string;
  channelId: string;
  /** The simulated WhatsApp number of `m2m dev` and the server's Meta callback route, so `m2m trigger` can post as Meta. */
  whatsapp?: { appSecret: string; phoneNumberId: string; wabaId: string; displayPhoneNumber: string; callbackUrl: string };
}

export async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** Written to a temporary file and renamed, so a kill mid-write never leaves half a file; readable by the owner only. */
export async function writeJson(file: string, value: unknown): Promise<void> {
  await mkdir(resolve(file, '..'), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  await rename(temporary, file);
}

function isMissing(error: unknown): boolean {
  return error instanceof Error && 'code' in error && error.code === 'ENOENT';
}

export const devStateFile = (env?: NodeJS.ProcessEnv) => join(stateDir(env), 'dev.json');

export interface CliConfig {
  baseUrl: string;
  apiKey?: string;
  adminToken?: string;
  /** The dev tenant, when `m2m dev` ran against this base URL. */
  dev?: DevState;
}

/** Environment first (M2M_API_KEY, M2M_BASE_URL, M2M_ADMIN_TOKEN); what `m2m dev` saved fills the gaps for its own server. */
export async function loadCliConfig(env: NodeJS.ProcessEnv = process.env): Promise<CliConfig> {
  const baseUrl = (env.M2M_BASE_URL || DEFAULT_BASE_URL).replace(/\/+$/, '');
  const saved = await readJson<DevState>(devStateFile(env));
  const dev = saved && saved.baseUrl === baseUrl ? saved : undefined;
  return { baseUrl, apiKey: env.M2M_API_KEY || dev?.apiKey, adminToken: env.M2M_ADMIN_TOKEN || dev?.adminToken, dev };
}

/** `…/m2m/v1` → `…/admin/v1`: the admin API lives next to the public one. */
export function adminBaseUrl(baseUrl: string): string {
  return baseUrl.replace(/\/m2m\/v1$/, '/admin/v1');
}

/** A short fingerprint that tells two keys apart in a state file without storing the key there. */
export function fingerprint(secret: string): string {
  return createHash('sha256').update(secret).digest('hex').slice(0, 16);
}
