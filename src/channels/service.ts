import type { Clock } from '../clock.js';
import type { Db } from '../db/driver.js';
import { invalid, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { Ctx } from '../context.js';
import { channelRepo, type ChannelKind, type TemplateRow } from './repo.js';
import { channelView, templateView, type ChannelDeployment } from './views.js';

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
    private readonly deployment: ChannelDeployment = { provider: 'sandbox' },
  ) {}

  async list({ tenantId }: Ctx) {
    const rows = await channelRepo.list(this.db, tenantId);
    return { channels: rows.map((row) => channelView(row, this.deployment)) };
  }

  async get({ tenantId }: Ctx, { channelId }: { channelId: string }) {
    const row = await channelRepo.get(this.db, tenantId, channelId);
    if (!row) throw notFound('channel');
    return { channel: channelView(row, this.deployment) };
  }

  /** The stored readiness of every template of the channel (never refreshed by this call). */
  async templates({ tenantId }: Ctx, { channelId }: { channelId: string }) {
    const channel = await channelRepo.get(this.db, tenantId, channelId);
    if (!channel) throw notFound('channel');
    return { templates: (await channelRepo.templates(this.db, tenantId, channelId)).map(templateView) };
  }

  async create(tenantId: string, input: { kind: ChannelKind; name: string; phoneNumber?: string; providerRef?: string; available?: boolean }) {
    const row = await channelRepo.insert(this.db, {
      id: newId('ch'),
      tenantId,
      kind: input.kind,
      name: input.name,
      phoneNumber: input.phoneNumber ?? null,
      providerRef: input.providerRef ?? null,
      available: input.available ?? true,
      now: this.clock.now(),
    });
    return { channelId: row.id, kind: row.kind, name: row.name, phoneNumber: row.phone_number, available: row.available };
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
