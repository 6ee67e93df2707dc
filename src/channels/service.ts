import type { Clock } from '../clock.js';
import type { Db } from '../db/driver.js';
import { conflict, invalid, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { Ctx } from '../context.js';
import { channelConnectionState, checkKind, openSecret, storedConnection, type ConnectionInput, type StoredConnection } from './connection.js';
import type { ProviderName } from './providers/types.js';
import { channelRepo, type ChannelKind, type ChannelRow, type TemplateRow } from './repo.js';
import { queueTemplateSync } from './template-sync.js';
import { channelView, templateView } from './views.js';

export const SUPPORTED_LOCALES = ['en_US', 'es_MX'] as const;
export const TEMPLATE_STATUSES = ['not_prepared', 'pending', 'approved', 'rejected', 'paused'] as const;

export function readinessView(row: TemplateRow) {
  return { channelId: row.channel_id, templateName: row.template_name, category: row.category, locales: row.locales };
}

/** Readiness of every supported locale; a locale without a record is `not_prepared`. */
export function startReadinessView(channelId: string, row: TemplateRow | undefined) {
  const locales = SUPPORTED_LOCALES.map(
    (locale) => row?.locales.find((entry) => entry.locale === locale) ?? { locale, status: 'not_prepared', ready: false },
  );
  return { channelId, ...(row ? { templateName: row.template_name, category: row.category } : {}), locales };
}

export class ChannelService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /** The keyring's AES-GCM key: connection tokens are sealed with it. */
    private readonly encryptionKey: Buffer,
    /** META_SYSTEM_USER_TOKEN is set: WhatsApp channels without their own token are connected through it. */
    private readonly systemUserTokenSet: boolean,
  ) {}

  /** The admin view of a channel: its provider, the public part of its connection and its status; never a token. */
  view(row: ChannelRow) {
    const { provider, connection } = channelConnectionState(row, this.systemUserTokenSet);
    const { widgetId, ...ids } = row.connection;
    return {
      channelId: row.id,
      kind: row.kind,
      provider,
      name: row.name,
      phoneNumber: row.phone_number,
      available: row.available,
      connection: { ...ids, ...connection },
      ...(widgetId ? { widgetId } : {}),
    };
  }

  async list({ tenantId }: Ctx) {
    const rows = await channelRepo.list(this.db, tenantId);
    return { channels: rows.map((row) => channelView(row, this.systemUserTokenSet)) };
  }

  async get({ tenantId }: Ctx, { channelId }: { channelId: string }) {
    const row = await channelRepo.get(this.db, tenantId, channelId);
    if (!row) throw notFound('channel');
    return { channel: channelView(row, this.systemUserTokenSet) };
  }

  /** The stored readiness of every template of the channel (never refreshed by this call). */
  async templates({ tenantId }: Ctx, { channelId }: { channelId: string }) {
    const channel = await channelRepo.get(this.db, tenantId, channelId);
    if (!channel) throw notFound('channel');
    return { templates: (await channelRepo.templates(this.db, tenantId, channelId)).map(templateView) };
  }

  async create(tenantId: string, input: { kind: ChannelKind; provider?: ProviderName; connection?: ConnectionInput; name: string; phoneNumber?: string; available?: boolean }) {
    const provider = input.provider ?? 'sandbox';
    checkKind(provider, input.kind);
    const stored = storedConnection(this.encryptionKey, provider, input.connection);
    await this.refuseTakenAddress(provider, stored, null);
    const now = this.clock.now();
    const row = await this.db.transaction(async (tx) => {
      const inserted = await channelRepo.insert(tx, {
      id: newId('ch'),
      tenantId,
      kind: input.kind,
      name: input.name,
      phoneNumber: input.phoneNumber ?? null,
      provider,
      stored,
      available: input.available ?? true,
      now,
      });
      // A new WhatsApp channel learns its templates' readiness from Meta right away (decisions 7.1).
      if (inserted?.provider === 'whatsapp_cloud') await queueTemplateSync(tx, now, tenantId, inserted.id);
      return inserted;
    });
    if (!row) throw this.addressConflict(provider);
    return this.view(row);
  }

  /** PATCH: name, availability, connection (same provider; fields left out, tokens included, are kept). */
  async update(tenantId: string, channelId: string, input: { name?: string; available?: boolean; connection?: ConnectionInput }) {
    const current = await channelRepo.get(this.db, tenantId, channelId);
    if (!current) throw notFound('channel');
    let stored: StoredConnection | undefined;
    if (input.connection !== undefined) {
      stored = storedConnection(this.encryptionKey, current.provider, input.connection, { connection: current.connection, secret: openSecret(this.encryptionKey, current.connection_secret) });
      await this.refuseTakenAddress(current.provider, stored, current.id);
    }
    const row = await channelRepo.update(this.db, tenantId, channelId, { name: input.name, available: input.available, stored }, this.clock.now());
    if (!row) throw notFound('channel');
    return this.view(row);
  }

  /** The channel's provider and connection status (for the public channel reads). */
  async providerState(tenantId: string, channelId: string) {
    const row = await channelRepo.get(this.db, tenantId, channelId);
    if (!row) throw notFound('channel');
    return channelConnectionState(row, this.systemUserTokenSet);
  }

  private async refuseTakenAddress(provider: ProviderName, stored: StoredConnection, channelId: string | null): Promise<void> {
    if (stored.providerRef && (await channelRepo.addressTaken(this.db, provider, stored.providerRef, channelId))) throw this.addressConflict(provider);
  }

  private addressConflict(provider: ProviderName) {
    return conflict(`another ${provider} channel is already connected to this account`, { reason: 'connection_taken' });
  }

  /** Stores a template's per-locale readiness as the provider reported it (the admin route stands in for that sync). */
  async putTemplate(
    tenantId: string,
    channelId: string,
    templateName: string,
    input: { category: string; locales: Array<{ locale: string; status: string; ready: boolean }> },
  ) {
    const channel = await channelRepo.get(this.db, tenantId, channelId);
    if (!channel) throw notFound('channel');
    const seen = new Set<string>();
    for (const entry of input.locales) {
      if (seen.has(entry.locale)) throw invalid('body.locales', `locale ${entry.locale} is listed twice`);
      seen.add(entry.locale);
      if (entry.ready && entry.status === 'not_prepared') throw invalid('body.locales', `locale ${entry.locale} cannot be ready while not_prepared`);
    }
    const now = this.clock.now();
    const row = await channelRepo.upsertTemplate(this.db, {
      tenantId,
      channelId,
      templateName,
      category: input.category,
      locales: input.locales.map((entry) => ({ ...entry, lastFetchedAt: now.toISOString() })),
      now,
    });
    return readinessView(row);
  }
}
