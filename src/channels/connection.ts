import { randomBytes } from 'node:crypto';
import { invalid } from '../errors.js';
import { decryptSecret, encryptSecret } from '../secrets.js';
import type { ChannelConnection, ProviderName } from './providers/types.js';
import type { ChannelKind, ChannelRow, PublicConnection, StoredConnection } from './repo.js';

export type { PublicConnection, StoredConnection } from './repo.js';

/**
 * A channel's connection (decisions 7.1): what the admin API accepts per provider, how it is kept (public
 * identifiers in `channels.connection`, tokens sealed in `channels.connection_secret`), and what anyone may see of
 * it (never a token). Jobs open the sealed part only when they call the provider.
 */

export const PROVIDERS = ['sandbox', 'whatsapp_cloud', 'messenger', 'instagram', 'webchat'] as const satisfies readonly ProviderName[];

/** The channel kind each provider serves; sandbox serves any kind (it simulates them). */
const KIND_OF: Record<Exclude<ProviderName, 'sandbox'>, ChannelKind> = {
  whatsapp_cloud: 'whatsapp',
  messenger: 'messenger',
  instagram: 'instagram',
  webchat: 'webchat',
};

/** The admin API's connection fields, every provider's together; which ones a provider takes is checked here. */
export interface ConnectionInput {
  phoneNumberId?: string;
  wabaId?: string;
  accessToken?: string;
  pageId?: string;
  pageAccessToken?: string;
  instagramAccountId?: string;
  allowedOrigins?: string[];
}

const FIELDS: Record<Exclude<ProviderName, 'sandbox'>, { required: Array<keyof ConnectionInput>; optional: Array<keyof ConnectionInput> }> = {
  whatsapp_cloud: { required: ['phoneNumberId', 'wabaId'], optional: ['accessToken'] },
  messenger: { required: ['pageId', 'pageAccessToken'], optional: [] },
  instagram: { required: ['instagramAccountId', 'accessToken'], optional: [] },
  webchat: { required: ['allowedOrigins'], optional: [] },
};

/** Tokens, sealed together in `channels.connection_secret`. */
interface SecretConnection {
  accessToken?: string;
  pageAccessToken?: string;
}

/** Checks that kind and provider go together (400 naming `body.provider`). */
export function checkKind(provider: ProviderName, kind: ChannelKind): void {
  if (provider !== 'sandbox' && KIND_OF[provider] !== kind) {
    throw invalid('body.provider', `a ${provider} channel is of kind ${KIND_OF[provider]}, not ${kind}`);
  }
}

function exactOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === value;
  } catch {
    return false;
  }
}

/**
 * The connection to store for `provider` from the admin input. `previous` (PATCH) keeps what the input leaves out,
 * tokens included, so changing one id never needs the token again.
 */
export function storedConnection(
  key: Buffer,
  provider: ProviderName,
  input: ConnectionInput | undefined,
  previous?: { connection: PublicConnection; secret: SecretConnection },
): StoredConnection {
  if (provider === 'sandbox') {
    if (input && Object.keys(input).length > 0) throw invalid('body.connection', 'a sandbox channel takes no connection');
    return { connection: {}, sealed: null, providerRef: null };
  }
  if (!input && !previous) throw invalid('body.connection', `a ${provider} channel needs its connection`);
  const fields = FIELDS[provider];
  for (const name of Object.keys(input ?? {}) as Array<keyof ConnectionInput>) {
    if (!fields.required.includes(name) && !fields.optional.includes(name)) throw invalid(`body.connection.${name}`, `is not part of a ${provider} connection`);
  }
  const merged: ConnectionInput = { ...previous?.connection, ...previous?.secret, ...input };
  for (const name of fields.required) {
    if (merged[name] === undefined) throw invalid(`body.connection.${name}`, `is required for a ${provider} connection`);
  }
  if (merged.allowedOrigins) {
    const bad = merged.allowedOrigins.find((origin) => !exactOrigin(origin));
    if (bad !== undefined) throw invalid('body.connection.allowedOrigins', `"${bad}" is not an exact origin such as https://example.com`);
  }
  const connection: PublicConnection = {};
  const secret: SecretConnection = {};
  switch (provider) {
    case 'whatsapp_cloud':
      Object.assign(connection, { phoneNumberId: merged.phoneNumberId, wabaId: merged.wabaId });
      if (merged.accessToken) secret.accessToken = merged.accessToken;
      break;
    case 'messenger':
      connection.pageId = merged.pageId;
      secret.pageAccessToken = merged.pageAccessToken;
      break;
    case 'instagram':
      connection.instagramAccountId = merged.instagramAccountId;
      secret.accessToken = merged.accessToken;
      break;
    case 'webchat':
      // The widget id is public and fixed once made: it is how the widget names its channel.
      Object.assign(connection, { allowedOrigins: [...new Set(merged.allowedOrigins)], widgetId: previous?.connection.widgetId ?? `wgt_${randomBytes(18).toString('base64url')}` });
      break;
  }
  const providerRef = connection.phoneNumberId ?? connection.pageId ?? connection.instagramAccountId ?? connection.widgetId ?? null;
  const sealed = Object.keys(secret).length > 0 ? encryptSecret(key, JSON.stringify(secret)) : null;
  return { connection, sealed, providerRef };
}

/** The tokens of a stored connection (jobs and PATCH only; never answered). */
export function openSecret(key: Buffer, sealed: string | null): SecretConnection {
  if (!sealed) return {};
  const parsed: unknown = JSON.parse(decryptSecret(key, sealed));
  if (typeof parsed !== 'object' || parsed === null) return {};
  const { accessToken, pageAccessToken } = parsed as Record<string, unknown>;
  return { ...(typeof accessToken === 'string' ? { accessToken } : {}), ...(typeof pageAccessToken === 'string' ? { pageAccessToken } : {}) };
}

/** The connection a provider call uses; `systemUserToken` (META_SYSTEM_USER_TOKEN) stands in for a WhatsApp channel without its own token. */
export function providerConnection(row: Pick<ChannelRow, 'provider' | 'connection' | 'connection_secret'>, key: Buffer, systemUserToken: string | undefined): ChannelConnection | undefined {
  const c = row.connection;
  switch (row.provider) {
    case 'sandbox':
      return { provider: 'sandbox' };
    case 'whatsapp_cloud': {
      const token = openSecret(key, row.connection_secret).accessToken ?? systemUserToken;
      if (!c.phoneNumberId || !token) return undefined;
      return { provider: 'whatsapp_cloud', phoneNumberId: c.phoneNumberId, wabaId: c.wabaId ?? '', accessToken: token };
    }
    case 'messenger': {
      const token = openSecret(key, row.connection_secret).pageAccessToken;
      return c.pageId && token ? { provider: 'messenger', pageId: c.pageId, pageAccessToken: token } : undefined;
    }
    case 'instagram': {
      const token = openSecret(key, row.connection_secret).accessToken;
      return c.instagramAccountId && token ? { provider: 'instagram', instagramAccountId: c.instagramAccountId, accessToken: token } : undefined;
    }
    case 'webchat':
      return c.widgetId ? { provider: 'webchat', widgetId: c.widgetId, allowedOrigins: c.allowedOrigins ?? [] } : undefined;
  }
}

export type ConnectionStatus = 'connected' | 'not_connected' | 'failing';

/** The connection part of a channel's public view (7.1): status, last traffic and last error; never a token. */
export interface ConnectionState {
  status: ConnectionStatus;
  lastInboundAt?: string;
  lastOutboundAt?: string;
  lastError?: { code: string; message: string; at: string };
}

/**
 * A channel's provider and connection status, for every read of a channel (admin answers and the public
 * `GET /channels`). `systemUserTokenSet`: a WhatsApp channel without its own token is connected through
 * META_SYSTEM_USER_TOKEN only when that is configured.
 */
export function channelConnectionState(row: ChannelRow, systemUserTokenSet: boolean): { provider: ProviderName; connection: ConnectionState } {
  let status: ConnectionStatus;
  if (row.failing_since) status = 'failing';
  else if (row.provider === 'sandbox') status = 'connected';
  else if (row.provider === 'whatsapp_cloud') status = row.connection.phoneNumberId && (row.connection_secret || systemUserTokenSet) ? 'connected' : 'not_connected';
  else status = row.provider_ref ? 'connected' : 'not_connected';
  return {
    provider: row.provider,
    connection: {
      status,
      ...(row.last_inbound_at ? { lastInboundAt: row.last_inbound_at.toISOString() } : {}),
      ...(row.last_outbound_at ? { lastOutboundAt: row.last_outbound_at.toISOString() } : {}),
      ...(row.last_error_code && row.last_error_at
        ? { lastError: { code: row.last_error_code, message: row.last_error_message ?? row.last_error_code, at: row.last_error_at.toISOString() } }
        : {}),
    },
  };
}
