import { iso } from '../util/time.js';
import type { ChannelRow, TemplateRow } from './repo.js';
import { channelConnectionState } from './connection.js';

/** The public channel (decisions 7.1): provider and connection status from the one rule, `channelConnectionState`. */
export function channelView(row: ChannelRow, systemUserTokenSet: boolean) {
  const { provider, connection } = channelConnectionState(row, systemUserTokenSet);
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
