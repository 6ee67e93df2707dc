import { iso } from '../util/time.js';
import type { ChannelRow, TemplateRow } from './repo.js';
import type { CHANNEL_PROVIDERS, CONNECTION_STATUSES } from './schema.js';

type Provider = (typeof CHANNEL_PROVIDERS)[number];
type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];

/** Which provider this deployment sends through (`CHANNEL_PROVIDER`): the only provider fact there is today. */
export interface ChannelDeployment {
  provider: 'sandbox' | 'whatsapp';
}

/**
 * A channel's provider and connection, from what is stored today: channels carry no provider of their own yet,
 * so a WhatsApp channel of a deployment that sends through the WhatsApp Cloud API is `whatsapp_cloud`, every
 * other channel `sandbox`. Connected means sends would go out: an available channel whose provider has what it
 * needs (the sandbox nothing; the Cloud API the channel's phone-number id). The one place to extend when
 * channels gain real connections.
 */
export function channelConnection(row: ChannelRow, deployment: ChannelDeployment): { provider: Provider; connection: { status: ConnectionStatus } } {
  const provider: Provider = row.kind === 'whatsapp' && deployment.provider === 'whatsapp' ? 'whatsapp_cloud' : 'sandbox';
  const configured = provider === 'sandbox' || row.provider_ref !== null;
  return { provider, connection: { status: row.available && configured ? 'connected' : 'not_connected' } };
}

export function channelView(row: ChannelRow, deployment: ChannelDeployment) {
  const { provider, connection } = channelConnection(row, deployment);
  return {
    channelId: row.id,
    kind: row.kind,
    provider,
    name: row.name,
    phoneNumber: row.phone_number ?? undefined,
    available: row.available,
    connection,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

export function templateView(row: TemplateRow) {
  return { templateName: row.template_name, category: row.category, locales: row.locales };
}
