import type { Queryable } from '../db/driver.js';
import type { ChannelKind } from '../channels/repo.js';
import type { InteractiveReply } from '../channels/providers/types.js';

/** Who wrote a message (decisions 7.2): `channel` for every inbound one. */
export type MessageSource = 'channel' | 'api' | 'automation' | 'lifecycle' | 'external';

/** The fields of a message beyond its text (decisions 7.2); stored as JSON where they are objects. */
export interface MessageContent {
  type?: string;
  source?: MessageSource;
  channelId?: string;
  providerMessageId?: string;
  media?: { contentType: string; sizeBytes?: number; filename?: string; status: 'pending' | 'ready' | 'failed'; providerMediaId?: string; url?: string; reason?: string };
  location?: { latitude: number; longitude: number; name?: string; address?: string };
  interactive?: InteractiveReply;
  reaction?: { emoji: string; targetMessageId?: string; targetProviderMessageId: string };
  contacts?: unknown[];
  replyToMessageId?: string;
}

function json(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}

export interface ContactRow {
  id: string;
  tenant_id: string;
  name: string | null;
  phone_e164: string | null;
  handle: string | null;
  consent: boolean;
  /** Where the business collected the opt-in (booking form, front desk); null when recorded without one. */
  consent_source: string | null;
  consent_granted_at: Date | null;
  opted_out: boolean;
  opted_out_at: Date | null;
  /** What a contact search matches: searchText() of the name, phone and handle. */
  search_text: string;
  created_at: Date;
  updated_at: Date;
}

export interface ConversationRow {
  id: string;
  tenant_id: string;
  channel_id: string;
  channel_kind: ChannelKind;
  contact_id: string;
  owner_operator_id: string | null;
  unread_count: number;
  needs_reply: boolean;
  needs_reply_reason: string | null;
  needs_reply_detail: string | null;
  needs_reply_event_id: string | null;
  last_message_at: Date;
  last_message_preview: string | null;
  /** The contact's last inbound message (the customer-service window starts there). */
  last_inbound_at: Date | null;
  open_review_id: string | null;
  open_handoff_id: string | null;
  /** Copies of the contact's name and phone (kept by `updateContact`). */
  contact_name: string | null;
  contact_phone: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface InboxCounts {
  total: number;
  unread: number;
  needsReply: number;
}

export interface ActivityRow {
  id: number;
  conversation_id: string;
  kind: string;
  actor_type: string;
  actor_id: string | null;
  data: Record<string, unknown>;
  created_at: Date;
}

/** Lowercased name, phone digits and handle: the text a contact search matches. */
export function searchText(contact: Pick<ContactRow, 'name' | 'phone_e164' | 'handle'>): string {
  return [contact.name?.toLowerCase(), contact.phone_e164?.replace(/\D/g, ''), contact.handle?.toLowerCase()].filter(Boolean).join(' ');
}

export const conversationRepo = {
  async findContactByPhone(db: Queryable, tenantId: string, phone: string): Promise<ContactRow | undefined> {
    return (await db.query<ContactRow>('SELECT * FROM contacts WHERE tenant_id = $1 AND phone_e164 = $2', [tenantId, phone]))[0];
  },

  async findContactByHandle(db: Queryable, tenantId: string, handle: string): Promise<ContactRow | undefined> {
    return (await db.query<ContactRow>('SELECT * FROM contacts WHERE tenant_id = $1 AND phone_e164 IS NULL AND handle = $2', [tenantId, handle]))[0];
  },

  async getContact(db: Queryable, tenantId: string, contactId: string): Promise<ContactRow | undefined> {
    return (await db.query<ContactRow>('SELECT * FROM contacts WHERE tenant_id = $1 AND id = $2', [tenantId, contactId]))[0];
  },

  async insertContact(db: Queryable, row: Pick<ContactRow, 'id' | 'tenant_id' | 'name' | 'phone_e164' | 'handle'> & { now: Date }): Promise<ContactRow> {
    const rows = await db.query<ContactRow>(
      `INSERT INTO contacts (id, tenant_id, name, phone_e164, handle, search_text, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
       ON CONFLICT DO NOTHING RETURNING *`,
      [row.id, row.tenant_id, row.name, row.phone_e164, row.handle, searchText(row), row.now],
    );
    return rows[0];
  },

  async updateContact(
    db: Queryable,
    tenantId: string,
    contactId: string,
    patch: { name?: string | null; handle?: string | null; consent?: boolean; consentSource?: string; optedOut?: boolean },
    now: Date,
  ): Promise<ContactRow | undefined> {
    // Recording consent records its source too (none from the admin API); grantedAt and optedOutAt keep the time
    // the state began, so recording the same state again moves neither.
    const rows = await db.query<ContactRow>(
      `UPDATE contacts SET
         name = CASE WHEN $3 THEN $4 ELSE name END,
         handle = CASE WHEN $5 THEN $6 ELSE handle END,
         consent = COALESCE($7, consent),
         consent_source = CASE WHEN $7::boolean IS NULL THEN consent_source ELSE $10 END,
         consent_granted_at = CASE WHEN $7::boolean IS NULL OR ($7 AND consent) THEN consent_granted_at WHEN $7 THEN $9::timestamptz END,
         opted_out = COALESCE($8, opted_out),
         opted_out_at = CASE WHEN $8::boolean IS NULL OR ($8 AND opted_out) THEN opted_out_at WHEN $8 THEN $9::timestamptz END,
         updated_at = $9
       WHERE tenant_id = $1 AND id = $2 RETURNING *`,
      [
        tenantId,
        contactId,
        patch.name !== undefined,
        patch.name ?? null,
        patch.handle !== undefined,
        patch.handle ?? null,
        patch.consent ?? null,
        patch.optedOut ?? null,
        now,
        patch.consentSource ?? null,
      ],
    );
    const contact = rows[0];
    // The contact's search text and its conversations' copies (name, phone) follow a change of name or handle.
    if (contact && (patch.name !== undefined || patch.handle !== undefined)) {
      contact.search_text = searchText(contact);
      await db.query(
        `WITH searched AS (UPDATE contacts SET search_text = $2 WHERE id = $1 AND tenant_id = $5)
         UPDATE conversations SET contact_name = $3, contact_phone = $4 WHERE contact_id = $1 AND tenant_id = $5`,
        [contact.id, contact.search_text, contact.name, contact.phone_e164, tenantId],
      );
    }
    return contact;
  },

  async findConversation(db: Queryable, tenantId: string, channelId: string, contactId: string): Promise<ConversationRow | undefined> {
    return (await db.query<ConversationRow>('SELECT * FROM conversations WHERE channel_id = $1 AND contact_id = $2 AND tenant_id = $3', [channelId, contactId, tenantId]))[0];
  },

  async insertConversation(
    db: Queryable,
    row: { id: string; tenantId: string; channelId: string; channelKind: string; contact: ContactRow; now: Date },
  ): Promise<ConversationRow> {
    const rows = await db.query<ConversationRow>(
      `INSERT INTO conversations (id, tenant_id, channel_id, channel_kind, contact_id, last_message_at, contact_name, contact_phone, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $6, $6) ON CONFLICT (channel_id, contact_id) DO NOTHING RETURNING *`,
      [row.id, row.tenantId, row.channelId, row.channelKind, row.contact.id, row.now, row.contact.name, row.contact.phone_e164],
    );
    return rows[0];
  },

  /** The conversation, locked for the rest of the transaction when `lock` is set. */
  async get(db: Queryable, tenantId: string, conversationId: string, lock = false): Promise<ConversationRow | undefined> {
    const rows = await db.query<ConversationRow>(`SELECT * FROM conversations WHERE tenant_id = $1 AND id = $2${lock ? ' FOR NO KEY UPDATE' : ''}`, [tenantId, conversationId]);
    return rows[0];
  },

  async insertMessage(
    db: Queryable,
    row: { id: string; tenantId: string; conversationId: string; direction: 'inbound' | 'outbound'; text: string; requestEventId?: string; now: Date } & MessageContent,
  ): Promise<boolean> {
    const rows = await db.query<{ id: string }>(
      `INSERT INTO messages (id, tenant_id, conversation_id, direction, text, request_event_id, created_at, type, source, channel_id, provider_message_id,
                             media, location, interactive, reaction, contacts, reply_to_message_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
       ON CONFLICT (channel_id, provider_message_id) WHERE provider_message_id IS NOT NULL DO NOTHING RETURNING id`,
      [
        row.id,
        row.tenantId,
        row.conversationId,
        row.direction,
        row.text,
        row.requestEventId ?? null,
        row.now,
        row.type ?? 'text',
        row.source ?? null,
        row.channelId ?? null,
        row.providerMessageId ?? null,
        json(row.media),
        json(row.location),
        json(row.interactive),
        json(row.reaction),
        json(row.contacts),
        row.replyToMessageId ?? null,
      ],
    );
    return rows.length > 0;
  },

  /** Our message id of a provider's message on the channel: an inbound one, or the request of an outbound one. */
  async messageIdByProviderId(db: Queryable, tenantId: string, channelId: string, providerMessageId: string): Promise<string | undefined> {
    const rows = await db.query<{ id: string }>(
      `SELECT id FROM messages WHERE channel_id = $2 AND provider_message_id = $3 AND tenant_id = $1
       UNION ALL
       SELECT r.reply_id FROM message_requests r JOIN channels c ON c.id = r.channel_id AND c.provider = r.provider
       WHERE c.id = $2 AND r.provider_message_id = $3 AND r.tenant_id = $1 LIMIT 1`,
      [tenantId, channelId, providerMessageId],
    );
    return rows[0]?.id;
  },

  /** An outbound message sent at `at` from outside this service (a Messenger/Instagram echo): the last activity only. */
  async recordExternalOutbound(db: Queryable, tenantId: string, conversationId: string, fields: { preview: string; at: Date; now: Date }): Promise<void> {
    await db.query(
      `UPDATE conversations SET updated_at = $4,
         last_message_preview = CASE WHEN $3 >= last_message_at THEN $2 ELSE last_message_preview END,
         last_message_at = GREATEST(last_message_at, $3)
       WHERE id = $1 AND tenant_id = $5`,
      [conversationId, fields.preview, fields.at, fields.now, tenantId],
    );
  },

  async markRead(db: Queryable, tenantId: string, conversationId: string, actorId: string, now: Date): Promise<void> {
    await db.query(`UPDATE conversations SET unread_count = 0, last_read_at = $3, last_read_by = $2, updated_at = $3 WHERE id = $1 AND tenant_id = $4`, [
      conversationId,
      actorId,
      now,
      tenantId,
    ]);
  },

  async clearNeedsReply(db: Queryable, tenantId: string, conversationId: string, now: Date): Promise<void> {
    await db.query(
      `UPDATE conversations SET needs_reply = false, needs_reply_reason = NULL, needs_reply_detail = NULL, needs_reply_event_id = NULL, updated_at = $2
       WHERE id = $1 AND tenant_id = $3`,
      [conversationId, now, tenantId],
    );
  },

  async setOwner(db: Queryable, tenantId: string, conversationId: string, operatorId: string | null, now: Date): Promise<void> {
    await db.query('UPDATE conversations SET owner_operator_id = $2, updated_at = $3 WHERE id = $1 AND tenant_id = $4', [conversationId, operatorId, now, tenantId]);
  },

  async setOpenCases(
    db: Queryable,
    tenantId: string,
    conversationId: string,
    cases: { reviewId?: string | null; handoffId?: string | null },
    now: Date,
  ): Promise<void> {
    await db.query(
      `UPDATE conversations SET
         open_review_id = CASE WHEN $2 THEN $3 ELSE open_review_id END,
         open_handoff_id = CASE WHEN $4 THEN $5 ELSE open_handoff_id END, updated_at = $6
       WHERE id = $1 AND tenant_id = $7`,
      [conversationId, cases.reviewId !== undefined, cases.reviewId ?? null, cases.handoffId !== undefined, cases.handoffId ?? null, now, tenantId],
    );
  },

  async insertActivity(
    db: Queryable,
    row: { tenantId: string; conversationId: string; kind: string; actorType: string; actorId: string | null; data: Record<string, unknown>; now: Date },
  ): Promise<void> {
    await db.query(
      `INSERT INTO conversation_activity (tenant_id, conversation_id, kind, actor_type, actor_id, data, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [row.tenantId, row.conversationId, row.kind, row.actorType, row.actorId, JSON.stringify(row.data), row.now],
    );
  },

  async activitySince(db: Queryable, tenantId: string, afterId: number, limit: number): Promise<ActivityRow[]> {
    return db.query<ActivityRow>(
      'SELECT id, conversation_id, kind, actor_type, actor_id, data, created_at FROM conversation_activity WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3',
      [tenantId, afterId, limit],
    );
  },

  async latestActivityId(db: Queryable, tenantId: string): Promise<number> {
    const rows = await db.query<{ id: number | null }>('SELECT max(id) AS id FROM conversation_activity WHERE tenant_id = $1', [tenantId]);
    return rows[0]?.id ?? 0;
  },
};
