import type { Queryable } from '../db/driver.js';
import type { ProviderName } from './providers/types.js';
import { cutText } from '../util/text.js';

/** Public identifiers, as stored in `channels.connection`. */
export interface PublicConnection {
  phoneNumberId?: string;
  wabaId?: string;
  pageId?: string;
  instagramAccountId?: string;
  allowedOrigins?: string[];
  widgetId?: string;
}

/** What the channel row keeps of a connection: its public part, the sealed tokens and the provider's address. */
export interface StoredConnection {
  connection: PublicConnection;
  sealed: string | null;
  providerRef: string | null;
}

export type ChannelKind = 'whatsapp' | 'instagram' | 'messenger' | 'webchat';

export interface ChannelRow {
  id: string;
  tenant_id: string;
  kind: ChannelKind;
  name: string;
  phone_number: string | null;
  /** The provider's address of the channel (WhatsApp phone-number id, page id, Instagram account id, widget id). */
  provider_ref: string | null;
  available: boolean;
  /** Fixed at creation (decisions 7.1). */
  provider: ProviderName;
  /** Public identifiers of the connection (src/channels/connection.ts). */
  connection: PublicConnection;
  /** Tokens sealed with the keyring's key; opened only by jobs that call the provider. */
  connection_secret: string | null;
  last_inbound_at: Date | null;
  last_outbound_at: Date | null;
  last_error_code: string | null;
  last_error_message: string | null;
  last_error_at: Date | null;
  failing_since: Date | null;
  /** Migration 0033's mark on channels of the CHANNEL_PROVIDER release (src/channels/legacy.ts). */
  legacy_sender: boolean;
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
    row: { id: string; tenantId: string; kind: ChannelKind; name: string; phoneNumber: string | null; provider: ProviderName; stored: StoredConnection; available: boolean; now: Date },
  ): Promise<ChannelRow | undefined> {
    const rows = await db.query<ChannelRow>(
      `INSERT INTO channels (id, tenant_id, kind, name, phone_number, provider_ref, available, provider, connection, connection_secret, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
       ON CONFLICT (provider, provider_ref) WHERE provider <> 'sandbox' AND provider_ref IS NOT NULL DO NOTHING RETURNING *`,
      [row.id, row.tenantId, row.kind, row.name, row.phoneNumber, row.stored.providerRef, row.available, row.provider, JSON.stringify(row.stored.connection), row.stored.sealed, row.now],
    );
    return rows[0];
  },

  /** PATCH: name, availability and a new connection (which clears a failing state: new credentials deserve a try). */
  async update(
    db: Queryable,
    tenantId: string,
    channelId: string,
    patch: { name?: string; available?: boolean; stored?: StoredConnection },
    now: Date,
  ): Promise<ChannelRow | undefined> {
    const rows = await db.query<ChannelRow>(
      `UPDATE channels SET name = COALESCE($3, name), available = COALESCE($4, available),
         provider_ref = CASE WHEN $5::boolean THEN $6 ELSE provider_ref END,
         connection = CASE WHEN $5::boolean THEN $7::jsonb ELSE connection END,
         connection_secret = CASE WHEN $5::boolean THEN $8 ELSE connection_secret END,
         failing_since = CASE WHEN $5::boolean THEN NULL ELSE failing_since END,
         updated_at = $9
       WHERE id = $1 AND tenant_id = $2 RETURNING *`,
      [
        channelId,
        tenantId,
        patch.name ?? null,
        patch.available ?? null,
        patch.stored !== undefined,
        patch.stored?.providerRef ?? null,
        JSON.stringify(patch.stored?.connection ?? {}),
        patch.stored?.sealed ?? null,
        now,
      ],
    );
    return rows[0];
  },

  /** Another channel of the provider already at this address (the unique index would refuse the write). */
  async addressTaken(db: Queryable, provider: ProviderName, providerRef: string, exceptChannelId: string | null): Promise<boolean> {
    const rows = await db.query<{ id: string }>('SELECT id FROM channels WHERE provider = $1 AND provider_ref = $2 AND id IS DISTINCT FROM $3', [provider, providerRef, exceptChannelId]);
    return rows.length > 0;
  },

  /** Across tenants by design: a provider callback names the channel only by its address. */
  async byProviderRefs(db: Queryable, provider: ProviderName, refs: readonly string[]): Promise<ChannelRow[]> {
    if (refs.length === 0) return [];
    return db.query<ChannelRow>('SELECT * FROM channels WHERE provider = $1 AND provider_ref = ANY($2::text[])', [provider, refs]);
  },

  /**
   * A provider call went through: the connection works. Every send of a channel would otherwise update its one row,
   * and the sends would queue on that row's lock: the time is kept to the second, so the row changes at most once a
   * second (or when it was failing).
   */
  async noteOutbound(db: Queryable, tenantId: string, channelId: string, at: Date): Promise<void> {
    await db.query(
      `UPDATE channels SET last_outbound_at = $3, failing_since = NULL
        WHERE id = $1 AND tenant_id = $2 AND (failing_since IS NOT NULL OR last_outbound_at IS NULL OR last_outbound_at <= $3::timestamptz - interval '1 second')`,
      [channelId, tenantId, at],
    );
  },

  /** Traffic came in through the channels: kept to the second as noteOutbound's time is, for the same reason (every message would update the row). */
  async noteInbound(db: Queryable, channelIds: readonly string[], at: Date): Promise<void> {
    if (channelIds.length === 0) return;
    await db.query(
      `UPDATE channels SET last_inbound_at = $2
        WHERE id = ANY($1::text[]) AND (last_inbound_at IS NULL OR last_inbound_at <= $2::timestamptz - interval '1 second')`,
      [channelIds, at],
    );
  },

  /** The provider's last error on the channel; `failing` when it refused the credentials. */
  async noteError(db: Queryable, tenantId: string, channelId: string, error: { code: string; message: string }, failing: boolean, at: Date): Promise<void> {
    await db.query(
      `UPDATE channels SET last_error_code = $3, last_error_message = $4, last_error_at = $5,
         failing_since = CASE WHEN $6::boolean THEN COALESCE(failing_since, $5) ELSE failing_since END
       WHERE id = $1 AND tenant_id = $2`,
      [channelId, tenantId, error.code, cutText(error.message, 500), at, failing],
    );
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

  /** Across tenants by design: the template sync visits every channel of a provider. */
  async allOfProvider(db: Queryable, provider: ProviderName): Promise<ChannelRow[]> {
    return db.query<ChannelRow>('SELECT * FROM channels WHERE provider = $1 ORDER BY id', [provider]);
  },

  /**
   * A template as the provider reported it. `updated_at` moves only when its category or a locale's status or
   * readiness changed (not for a new lastFetchedAt): the start template is the most recently updated record, and a
   * sync that changes nothing must not pick another.
   */
  async syncTemplate(
    db: Queryable,
    row: { tenantId: string; channelId: string; templateName: string; category: string; locales: TemplateLocale[]; now: Date },
  ): Promise<void> {
    await db.query(
      `INSERT INTO channel_templates AS t (tenant_id, channel_id, template_name, category, locales, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (channel_id, template_name) DO UPDATE SET category = EXCLUDED.category, locales = EXCLUDED.locales,
         updated_at = CASE WHEN t.category IS DISTINCT FROM EXCLUDED.category
                             OR (SELECT jsonb_agg(jsonb_build_array(l->>'locale', l->>'status', l->'ready') ORDER BY l->>'locale') FROM jsonb_array_elements(t.locales) l)
                                IS DISTINCT FROM
                                (SELECT jsonb_agg(jsonb_build_array(l->>'locale', l->>'status', l->'ready') ORDER BY l->>'locale') FROM jsonb_array_elements(EXCLUDED.locales) l)
                           THEN EXCLUDED.updated_at ELSE t.updated_at END`,
      [row.tenantId, row.channelId, row.templateName, row.category, JSON.stringify(row.locales), row.now],
    );
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
