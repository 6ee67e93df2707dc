import type { Tx } from '../db/driver.js';
import { newId } from '../ids.js';
import type { ChannelRow } from '../channels/repo.js';
import { WEBHOOKS_CHANNEL, eventRecord } from '../webhooks/events.js';
import { ACTIVITY_CHANNEL } from './actor.js';
import { contactAddress, messageType, preview, type InboundInput } from './inbound-input.js';
import { inboundRepo, type InboundMessageRow } from './inbound-repo.js';
import { searchText, type ContactRow } from './repo.js';

/** One inbound message of a group, as writeInbound takes it; a reply names the message it answers by provider id. */
export interface InboundBatchItem {
  channel: ChannelRow;
  input: InboundInput;
  replyToProviderMessageId?: string;
}

export interface InboundWritten {
  conversationId: string;
  messageId: string;
  contactId: string;
  /** The contact did not exist before this group. */
  contactCreated: boolean;
}

/**
 * The one home of what an inbound message does, whoever delivers it (writeInbound, src/conversations/inbox.ts, is a
 * group of one), for a group of messages in the caller's transaction, with a few statements for the whole group:
 * contacts found, created or renamed, conversations found or created and locked (in id order), the messages stored,
 * unread and needs-reply raised, activity and message.created written (inbound_messages). The outcome is the one
 * writing the items one by one in their order would give: per item, what was written, or undefined for a provider
 * message id already stored (a redelivery: nothing written, nothing emitted). An item whose contact has no usable
 * address throws (contactAddress): a caller that must skip such items checks them first.
 */
export async function writeInboundBatch(tx: Tx, items: readonly InboundBatchItem[], now: Date): Promise<Array<InboundWritten | undefined>> {
  if (items.length === 0) return [];
  const contacts = await resolveContacts(tx, items, now);
  const conversationIds = await resolveConversations(tx, items, contacts);
  const messageIds = items.map(() => newId('msg'));
  const ours = await providerIdsResolved(tx, items, messageIds);
  const rows = items.map((item, index): InboundMessageRow => {
    const { channel, input } = item;
    const tenantId = channel.tenant_id;
    const conversationId = conversationIds[index];
    const messageId = messageIds[index];
    const event = eventRecord(now, tenantId, 'message.created', { messageId, conversationId, direction: 'inbound', channel: channel.kind, type: messageType(input.type) });
    const replyTo = item.replyToProviderMessageId ? ours(index, item.replyToProviderMessageId) : undefined;
    const target = input.reaction ? ours(index, input.reaction.targetProviderMessageId) : undefined;
    return {
      n: index + 1,
      message_id: messageId,
      tenant_id: tenantId,
      channel_id: channel.id,
      contact_id: contacts[index].contact.id,
      conversation_id: conversationId,
      text: input.text,
      at: input.at,
      type: input.type ?? 'text',
      source: input.source ?? null,
      provider_message_id: input.providerMessageId ?? null,
      media: input.media ?? null,
      location: input.location ?? null,
      interactive: input.interactive ?? null,
      reaction: input.reaction ? { ...input.reaction, ...(target ? { targetMessageId: target } : {}) } : null,
      contacts: input.contacts ?? null,
      reply_to_message_id: replyTo ?? input.replyToMessageId ?? null,
      preview: preview(input.text || `[${input.type ?? 'text'}]`),
      event_id: event.eventId,
      event_body: event.body,
      event_read_scope: event.readScope,
      event_write_scope: event.writeScope,
    };
  });
  const written = await inboundRepo.writeMessages(tx, rows, now);
  if (written.length > 0) tx.notify(ACTIVITY_CHANNEL);
  if (written.some((row) => row.deliveries > 0)) tx.notify(WEBHOOKS_CHANNEL);
  const result: Array<InboundWritten | undefined> = items.map(() => undefined);
  for (const { n } of written) {
    const index = n - 1;
    result[index] = { conversationId: conversationIds[index], messageId: messageIds[index], contactId: contacts[index].contact.id, contactCreated: contacts[index].created };
  }
  return result;
}

interface ContactGroup {
  tenantId: string;
  phone?: string;
  handle?: string;
  /** The items of this contact, in order. */
  items: InboundInput[];
}

function contactKey(tenantId: string, address: { phone?: string | null; handle?: string | null }): string {
  return address.phone ? `${tenantId} p ${address.phone}` : `${tenantId} h ${address.handle ?? ''}`;
}

/**
 * ensureContact for every item: a new contact takes its items' last name and first handle; a known one is renamed
 * to the last name given and gains the first handle given when it has none, as item after item would do.
 */
async function resolveContacts(tx: Tx, items: readonly InboundBatchItem[], now: Date): Promise<Array<{ contact: ContactRow; created: boolean }>> {
  const groups = new Map<string, ContactGroup>();
  const keys = items.map(({ channel, input }) => {
    const address = contactAddress(input.contact);
    const key = contactKey(channel.tenant_id, address);
    const group: ContactGroup = groups.get(key) ?? { tenantId: channel.tenant_id, ...address, items: [] };
    group.items.push(input);
    groups.set(key, group);
    return key;
  });
  const lastName = (group: ContactGroup) => group.items.reduce<string | undefined>((name, input) => input.contact.name ?? name, undefined);
  const firstHandle = (group: ContactGroup) => group.items.find((input) => input.contact.handle !== undefined)?.contact.handle;

  const known = await findContacts(tx, [...groups.values()]);
  const created = new Map<string, ContactRow>();
  const fresh = [...groups.entries()].filter(([key]) => !known.has(key));
  if (fresh.length > 0) {
    const rows = fresh.map(([, group]) => ({ id: newId('ct'), tenant_id: group.tenantId, name: lastName(group) ?? null, phone_e164: group.phone ?? null, handle: group.handle ?? firstHandle(group) ?? null }));
    for (const row of await inboundRepo.insertContacts(tx, rows, now)) created.set(contactKey(row.tenant_id, { phone: row.phone_e164, handle: row.handle }), row);
    // Created meanwhile by another transaction: known after all.
    const raced = fresh.filter(([key]) => !created.has(key));
    if (raced.length > 0) for (const [key, row] of await findContacts(tx, raced.map(([, group]) => group))) known.set(key, row);
  }

  const renamed: ContactRow[] = [];
  for (const [key, contact] of known) {
    const group = groups.get(key)!;
    const name = lastName(group) ?? contact.name;
    const handle = contact.handle ?? firstHandle(group) ?? null;
    if (name === contact.name && handle === contact.handle) continue;
    const updated = { ...contact, name, handle, updated_at: now };
    updated.search_text = searchText(updated);
    known.set(key, updated);
    renamed.push(updated);
  }
  await inboundRepo.renameContacts(tx, renamed, now);
  return keys.map((key) => {
    const mine = created.get(key);
    return mine ? { contact: mine, created: true } : { contact: known.get(key)!, created: false };
  });
}

async function findContacts(tx: Tx, groups: readonly ContactGroup[]): Promise<Map<string, ContactRow>> {
  const byPhone = groups.filter((g) => g.phone !== undefined);
  const byHandle = groups.filter((g) => g.phone === undefined);
  const rows = await inboundRepo.findContacts(
    tx,
    { tenantIds: byPhone.map((g) => g.tenantId), phones: byPhone.map((g) => g.phone!) },
    { tenantIds: byHandle.map((g) => g.tenantId), handles: byHandle.map((g) => g.handle ?? '') },
  );
  return new Map(rows.map((row) => [contactKey(row.tenant_id, { phone: row.phone_e164, handle: row.handle }), row]));
}

/** ensureConversation and the conversation's lock for every item: one conversation per channel and contact, created at its first message's time. */
async function resolveConversations(tx: Tx, items: readonly InboundBatchItem[], contacts: ReadonlyArray<{ contact: ContactRow }>): Promise<string[]> {
  const pairKey = (channelId: string, contactId: string) => `${channelId} ${contactId}`;
  const pairs = new Map<string, { tenantId: string; channelId: string; channelKind: string; contact: ContactRow; at: Date }>();
  items.forEach(({ channel, input }, index) => {
    const contact = contacts[index].contact;
    const key = pairKey(channel.id, contact.id);
    if (!pairs.has(key)) pairs.set(key, { tenantId: channel.tenant_id, channelId: channel.id, channelKind: channel.kind, contact, at: input.at });
  });
  const found = new Map<string, string>();
  const lock = async (wanted: Array<{ tenantId: string; channelId: string; contact: ContactRow }>) => {
    const rows = await inboundRepo.lockConversations(tx, wanted.map((p) => ({ tenantId: p.tenantId, channelId: p.channelId, contactId: p.contact.id })));
    for (const row of rows) found.set(pairKey(row.channel_id, row.contact_id), row.id);
  };
  await lock([...pairs.values()]);
  const missing = [...pairs.entries()].filter(([key]) => !found.has(key)).map(([, pair]) => pair);
  if (missing.length > 0) {
    const inserted = await inboundRepo.insertConversations(tx, missing.map((pair) => ({ ...pair, id: newId('conv') })));
    for (const row of inserted) found.set(pairKey(row.channel_id, row.contact_id), row.id);
    // Created meanwhile by another transaction.
    const raced = missing.filter((pair) => !found.has(pairKey(pair.channelId, pair.contact.id)));
    if (raced.length > 0) await lock(raced);
  }
  return items.map(({ channel }, index) => found.get(pairKey(channel.id, contacts[index].contact.id))!);
}

/**
 * Our message ids of the provider ids the items refer to (the message answered, the message reacted to): stored
 * ones, and otherwise an earlier item of the group, as writing the items one by one would find it.
 */
async function providerIdsResolved(tx: Tx, items: readonly InboundBatchItem[], messageIds: readonly string[]): Promise<(index: number, providerMessageId: string) => string | undefined> {
  const key = (channelId: string, providerMessageId: string) => `${channelId} ${providerMessageId}`;
  const refs = new Map<string, { tenantId: string; channelId: string; providerMessageId: string }>();
  for (const { channel, input, replyToProviderMessageId } of items) {
    for (const providerMessageId of [replyToProviderMessageId, input.reaction?.targetProviderMessageId]) {
      if (providerMessageId) refs.set(key(channel.id, providerMessageId), { tenantId: channel.tenant_id, channelId: channel.id, providerMessageId });
    }
  }
  const stored = new Map<string, string>();
  if (refs.size > 0) for (const row of await inboundRepo.messageIdsByProviderIds(tx, [...refs.values()])) stored.set(key(row.channel_id, row.provider_message_id), row.id);
  return (index, providerMessageId) => {
    const channelId = items[index].channel.id;
    const hit = stored.get(key(channelId, providerMessageId));
    if (hit) return hit;
    for (let earlier = 0; earlier < index; earlier++) {
      if (items[earlier].channel.id === channelId && items[earlier].input.providerMessageId === providerMessageId) return messageIds[earlier];
    }
    return undefined;
  };
}
