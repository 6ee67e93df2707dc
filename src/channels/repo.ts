import type { Queryable } from '../db/driver.js';

export type ChannelKind = 'whatsapp' | 'instagram' | 'messenger' | 'webchat';

export interface ChannelRow {
  id: string;
  tenant_id: string;
  kind: ChannelKind;
  name: string;
  phone_number: string | null;
  /** The provider's id for this sender (WhatsApp Cloud API phone-number id). */
  provider_ref: string | null;
  available: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface TemplateLocale {
  locale: string;
  status: string;
  ready: boolean;
  lastFetchedAt: string;
}

export interface TemplateRow {
  channel_id: string;
  template_name: string;
  category: string;
  locales: TemplateLocale[];
  updated_at: Date;
}

export const channelRepo = {
  async insert(
    db: Queryable,
    row: { id: string; tenantId: string; kind: ChannelKind; name: string; phoneNumber: string | null; providerRef: string | null; available: boolean; now: Date },
  ): Promise<ChannelRow> {
    const rows = await db.query<ChannelRow>(
      `INSERT INTO channels (id, tenant_id, kind, name, phone_number, provider_ref, available, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING *`,
      [row.id, row.tenantId, row.kind, row.name, row.phoneNumber, row.providerRef, row.available, row.now],
    );
    return rows[0];
  },

  async get(db: Queryable, tenantId: string, channelId: string): Promise<ChannelRow | undefined> {
    return (await db.query<ChannelRow>('SELECT * FROM channels WHERE id = $1 AND tenant_id = $2', [channelId, tenantId]))[0];
  },

  /** The tenant's channels, oldest first (a tenant has a handful). */
  async list(db: Queryable, tenantId: string): Promise<ChannelRow[]> {
    return db.query<ChannelRow>('SELECT * FROM channels WHERE tenant_id = $1 ORDER BY created_at, id', [tenantId]);
  },

  /** Every template record of a channel, by name. */
  async templates(db: Queryable, tenantId: string, channelId: string): Promise<TemplateRow[]> {
    return db.query<TemplateRow>('SELECT * FROM channel_templates WHERE tenant_id = $1 AND channel_id = $2 ORDER BY template_name', [tenantId, channelId]);
  },

  /** The channel's conversation-start template: the most recently updated template record. */
  async latestTemplate(db: Queryable, tenantId: string, channelId: string): Promise<TemplateRow | undefined> {
    const rows = await db.query<TemplateRow>(
      'SELECT * FROM channel_templates WHERE tenant_id = $1 AND channel_id = $2 ORDER BY updated_at DESC, template_name LIMIT 1',
      [tenantId, channelId],
    );
    return rows[0];
  },

  async upsertTemplate(
    db: Queryable,
    row: { tenantId: string; channelId: string; templateName: string; category: string; locales: TemplateLocale[]; now: Date },
  ): Promise<TemplateRow> {
    const rows = await db.query<TemplateRow>(
      `INSERT INTO channel_templates (tenant_id, channel_id, template_name, category, locales, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (channel_id, template_name) DO UPDATE SET category = EXCLUDED.category, locales = EXCLUDED.locales, updated_at = EXCLUDED.updated_at
       RETURNING *`,
      [row.tenantId, row.channelId, row.templateName, row.category, JSON.stringify(row.locales), row.now],
    );
    return rows[0];
  },
};
