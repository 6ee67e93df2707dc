import type { Queryable } from '../db/driver.js';
import { searchText, type ContactRow } from './repo.js';

/** One inbound message as inbound_messages stores it (the type inbound_message, migration 0039). */
export interface InboundMessageRow {
  n: number;
  message_id: string;
  tenant_id: string;
  channel_id: string;
  contact_id: string;
  conversation_id: string;
  text: string;
  at: Date;
  type: string;
  source: string | null;
  provider_message_id: string | null;
  media: unknown;
  location: unknown;
  interactive: unknown;
  reaction: unknown;
  contacts: unknown;
  reply_to_message_id: string | null;
  preview: string;
  event_id: string;
  event_body: string;
  event_read_scope: string;
  event_write_scope: string;
}

interface ConversationKey {
  id: string;
  channel_id: string;
  contact_id: string;
}

/**
 * The set-based statements of the inbound write (src/conversations/inbound-batch.ts): each reads or writes the
 * contacts, conversations or messages of a whole group of inbound messages at once.
 */
export const inboundRepo = {
  /** The tenants' contacts with these phones, and those without a phone with these handles. */
  findContacts(db: Queryable, byPhone: { tenantIds: string[]; phones: string[] }, byHandle: { tenantIds: string[]; handles: string[] }): Promise<ContactRow[]> {
    return db.query<ContactRow>(
      `SELECT c.* FROM unnest($1::text[], $2::text[]) AS a(tenant_id, phone) JOIN contacts c ON c.tenant_id = a.tenant_id AND c.phone_e164 = a.phone
       UNION ALL
       SELECT c.* FROM unnest($3::text[], $4::text[]) AS a(tenant_id, handle) JOIN contacts c ON c.tenant_id = a.tenant_id AND c.phone_e164 IS NULL AND c.handle = a.handle`,
      [byPhone.tenantIds, byPhone.phones, byHandle.tenantIds, byHandle.handles],
    );
  },

  /** Inserts the contacts; those another transaction created meanwhile are left out of the rows returned. */
  insertContacts(db: Queryable, rows: ReadonlyArray<Pick<ContactRow, 'id' | 'tenant_id' | 'name' | 'phone_e164' | 'handle'>>, now: Date): Promise<ContactRow[]> {
    return db.query<ContactRow>(
      `INSERT INTO contacts (id, tenant_id, name, phone_e164, handle, search_text, created_at, updated_at)
       SELECT c.id, c.tenant_id, c.name, c.phone_e164, c.handle, c.search_text, $7, $7
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS c(id, tenant_id, name, phone_e164, handle, search_text)
       ORDER BY c.tenant_id, c.phone_e164, c.handle
       ON CONFLICT DO NOTHING RETURNING *`,
      [rows.map((r) => r.id), rows.map((r) => r.tenant_id), rows.map((r) => r.name), rows.map((r) => r.phone_e164), rows.map((r) => r.handle), rows.map(searchText), now],
    );
  },

  /**
   * Sets the contacts' names, handles and search text, and their conversations' copies (name, phone), as
   * conversationRepo.updateContact does for one.
   */
  async renameContacts(db: Queryable, rows: ReadonlyArray<Pick<ContactRow, 'id' | 'tenant_id' | 'name' | 'handle' | 'search_text'>>, now: Date): Promise<void> {
    if (rows.length === 0) return;
    await db.query(
      `WITH p AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS p(id, tenant_id, name, handle, search_text)),
       changed AS (
         UPDATE contacts c SET name = p.name, handle = p.handle, search_text = p.search_text, updated_at = $6 FROM p
         WHERE c.id = p.id AND c.tenant_id = p.tenant_id RETURNING c.id, c.tenant_id, c.name, c.phone_e164
       )
       UPDATE conversations cv SET contact_name = changed.name, contact_phone = changed.phone_e164
       FROM changed
       WHERE cv.contact_id = changed.id AND cv.tenant_id = changed.tenant_id`,
      [rows.map((r) => r.id), rows.map((r) => r.tenant_id), rows.map((r) => r.name), rows.map((r) => r.handle), rows.map((r) => r.search_text), now],
    );
  },

  /** The conversations of these channel and contact pairs, locked for the rest of the transaction (in id order). */
  lockConversations(db: Queryable, pairs: ReadonlyArray<{ tenantId: string; channelId: string; contactId: string }>): Promise<ConversationKey[]> {
    return db.query<ConversationKey>(
      `SELECT cv.id, cv.channel_id, cv.contact_id FROM unnest($1::text[], $2::text[], $3::text[]) AS p(tenant_id, channel_id, contact_id)
       JOIN conversations cv ON cv.channel_id = p.channel_id AND cv.contact_id = p.contact_id AND cv.tenant_id = p.tenant_id
       ORDER BY cv.id FOR NO KEY UPDATE OF cv`,
      [pairs.map((p) => p.tenantId), pairs.map((p) => p.channelId), pairs.map((p) => p.contactId)],
    );
  },

  /** Inserts the conversations (as conversationRepo.insertConversation); those created meanwhile are left out of the rows returned. */
  insertConversations(
    db: Queryable,
    rows: ReadonlyArray<{ id: string; tenantId: string; channelId: string; channelKind: string; contact: ContactRow; at: Date }>,
  ): Promise<ConversationKey[]> {
    return db.query<ConversationKey>(
      `INSERT INTO conversations (id, tenant_id, channel_id, channel_kind, contact_id, last_message_at, contact_name, contact_phone, created_at, updated_at)
       SELECT p.id, p.tenant_id, p.channel_id, p.channel_kind, p.contact_id, p.at, p.contact_name, p.contact_phone, p.at, p.at
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[], $8::text[])
         AS p(id, tenant_id, channel_id, channel_kind, contact_id, at, contact_name, contact_phone)
       ORDER BY p.id
       ON CONFLICT (channel_id, contact_id) DO NOTHING RETURNING id, channel_id, contact_id`,
      [
        rows.map((r) => r.id),
        rows.map((r) => r.tenantId),
        rows.map((r) => r.channelId),
        rows.map((r) => r.channelKind),
        rows.map((r) => r.contact.id),
        rows.map((r) => r.at.toISOString()),
        rows.map((r) => r.contact.name),
        rows.map((r) => r.contact.phone_e164),
      ],
    );
  },

  /** conversationRepo.messageIdByProviderId for many provider ids at once: our message id of each one found. */
  messageIdsByProviderIds(db: Queryable, refs: ReadonlyArray<{ tenantId: string; channelId: string; providerMessageId: string }>): Promise<Array<{ channel_id: string; provider_message_id: string; id: string }>> {
    return db.query<{ channel_id: string; provider_message_id: string; id: string }>(
      `SELECT p.channel_id, p.provider_message_id, m.id FROM unnest($1::text[], $2::text[], $3::text[]) AS p(tenant_id, channel_id, provider_message_id)
       CROSS JOIN LATERAL (
         SELECT id FROM messages WHERE channel_id = p.channel_id AND provider_message_id = p.provider_message_id AND tenant_id = p.tenant_id
         UNION ALL
         SELECT r.reply_id FROM message_requests r JOIN channels c ON c.id = r.channel_id AND c.provider = r.provider
         WHERE c.id = p.channel_id AND r.provider_message_id = p.provider_message_id AND r.tenant_id = p.tenant_id
         LIMIT 1
       ) m`,
      [refs.map((r) => r.tenantId), refs.map((r) => r.channelId), refs.map((r) => r.providerMessageId)],
    );
  },

  /** inbound_messages (src/conversations/sql/inbound_messages.sql): the items written, with their events' deliveries. */
  writeMessages(db: Queryable, rows: readonly InboundMessageRow[], now: Date): Promise<Array<{ n: number; deliveries: number }>> {
    return db.query<{ n: number; deliveries: number }>('SELECT n, deliveries FROM inbound_messages($1::jsonb, $2)', [JSON.stringify(rows), now]);
  },
};
