import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { conflict, invalid, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { cutText } from '../util/text.js';
import { channelRepo, type ChannelRow } from '../channels/repo.js';
import { emit } from '../webhooks/events.js';
import type { Actor } from '../context.js';
import { normalizePhone } from './phone.js';
import { conversationRepo, type ContactRow, type ConversationRow, type MessageContent } from './repo.js';
import { MESSAGE_TYPES } from '../events/types.js';
import { caseRepo } from './case-repo.js';
import { recordActivity, requireActiveOperator, requireConversation } from './service.js';
import { contactView, conversationView, handoffView } from './views.js';

export interface ContactInput {
  name?: string;
  phone?: string;
  handle?: string;
  /**
   * The phone is the provider's own id of the guest (WhatsApp `wa_id`): kept as given when it has the E.164 shape,
   * even where our phone-number rules do not know the numbering plan (WhatsApp knows the number exists).
   */
  phoneFromProvider?: boolean;
}

const E164_SHAPE = /^\+[1-9][0-9]{6,14}$/;

const PREVIEW_LENGTH = 140;

/** The inbox's preview of a message: at most PREVIEW_LENGTH code points, never cut inside a character (src/util/text.ts). */
export function preview(text: string): string {
  return cutText(text, PREVIEW_LENGTH, '…');
}

/**
 * How a contact is found: by its E.164 phone, or by handle when there is no phone. A DomainError when the input
 * has neither a usable phone nor a handle.
 */
export function contactAddress(input: ContactInput): { phone?: string; handle?: string } {
  let phone: string | undefined;
  if (input.phone !== undefined) {
    phone = normalizePhone(input.phone) ?? (input.phoneFromProvider && E164_SHAPE.test(input.phone) ? input.phone : undefined);
    if (!phone) throw invalid('body.contact.phone', 'must be a valid international phone number such as +525512345678');
  }
  if (!phone && !input.handle) throw invalid('body.contact', 'needs a phone or a handle');
  return phone ? { phone } : { handle: input.handle };
}

/** Finds the contact by E.164 phone (or by handle when there is no phone), creating it if needed. */
export async function ensureContact(tx: Tx, tenantId: string, input: ContactInput, now: Date): Promise<ContactRow> {
  const { phone } = contactAddress(input);
  const find = () => (phone ? conversationRepo.findContactByPhone(tx, tenantId, phone) : conversationRepo.findContactByHandle(tx, tenantId, input.handle!));
  let contact = await find();
  if (!contact) {
    const inserted = await conversationRepo.insertContact(tx, { id: newId('ct'), tenant_id: tenantId, name: input.name ?? null, phone_e164: phone ?? null, handle: input.handle ?? null, now });
    contact = inserted ?? (await find());
    if (!contact) throw conflict('contact was created concurrently; retry');
    return contact;
  }
  const rename = input.name !== undefined && input.name !== contact.name;
  const addHandle = input.handle !== undefined && contact.handle === null;
  if (rename || addHandle) {
    contact = (await conversationRepo.updateContact(tx, tenantId, contact.id, { ...(rename ? { name: input.name } : {}), ...(addHandle ? { handle: input.handle } : {}) }, now))!;
  }
  return contact;
}

/** One conversation per channel and contact. */
export async function ensureConversation(tx: Tx, tenantId: string, channel: ChannelRow, contact: ContactRow, now: Date): Promise<ConversationRow> {
  const existing = await conversationRepo.findConversation(tx, tenantId, channel.id, contact.id);
  if (existing) return existing;
  const inserted = await conversationRepo.insertConversation(tx, {
    id: newId('conv'),
    tenantId,
    channelId: channel.id,
    channelKind: channel.kind,
    contact,
    now,
  });
  return inserted ?? (await conversationRepo.findConversation(tx, tenantId, channel.id, contact.id))!;
}

/** One inbound message as a channel delivers it (admin simulation or a provider callback). */
export interface InboundInput extends Omit<MessageContent, 'channelId'> {
  contact: ContactInput;
  /** Body or caption; '' when there is none. */
  text: string;
  /** When the guest sent it (the provider's timestamp): the message time and the start of the customer-service window. */
  at: Date;
}

/**
 * The one home of what an inbound message does, whoever delivers it: contact and conversation found or created,
 * the message stored, unread and needs-reply raised (recordInbound), activity recorded and message.created emitted,
 * in the caller's transaction. Undefined when the channel already has this provider message id (a redelivery:
 * nothing written, nothing emitted).
 */
export async function writeInbound(tx: Tx, channel: ChannelRow, input: InboundInput, now: Date): Promise<{ conversationId: string; messageId: string; contactId: string } | undefined> {
  const tenantId = channel.tenant_id;
  const contact = await ensureContact(tx, tenantId, input.contact, now);
  const conversation = await ensureConversation(tx, tenantId, channel, contact, input.at);
  await conversationRepo.get(tx, tenantId, conversation.id, true);
  const messageId = newId('msg');
  const { contact: _, text, at, ...content } = input;
  const inserted = await conversationRepo.insertMessage(tx, { ...content, id: messageId, tenantId, conversationId: conversation.id, direction: 'inbound', text, now: at, channelId: channel.id });
  if (!inserted) return undefined;
  await conversationRepo.recordInbound(tx, tenantId, conversation.id, { messageId, preview: preview(text || `[${input.type ?? 'text'}]`), at, now });
  await recordActivity(tx, { tenantId, conversationId: conversation.id, kind: 'message.inbound', actor: { type: 'contact', id: contact.id }, data: { messageId }, now });
  await emit(tx, now, tenantId, 'message.created', { messageId, conversationId: conversation.id, direction: 'inbound', channel: channel.kind, type: messageType(input.type) });
  return { conversationId: conversation.id, messageId, contactId: contact.id };
}

/**
 * A message the business sent from another tool (a Messenger/Instagram echo not sent by this service): stored as an
 * outbound message with `source: external` on the guest's conversation (created if needed), the last activity
 * moved, message.created emitted (`direction: outbound`); no obligation changes. Undefined when the channel already
 * has this provider message id (a redelivery).
 */
export async function writeExternalOutbound(tx: Tx, channel: ChannelRow, input: InboundInput, now: Date): Promise<{ conversationId: string; messageId: string; contactId: string } | undefined> {
  const tenantId = channel.tenant_id;
  const contact = await ensureContact(tx, tenantId, input.contact, now);
  const conversation = await ensureConversation(tx, tenantId, channel, contact, input.at);
  await conversationRepo.get(tx, tenantId, conversation.id, true);
  const messageId = newId('msg');
  const { contact: _, text, at, ...content } = input;
  const inserted = await conversationRepo.insertMessage(tx, { ...content, source: 'external', id: messageId, tenantId, conversationId: conversation.id, direction: 'outbound', text, now: at, channelId: channel.id });
  if (!inserted) return undefined;
  await conversationRepo.recordExternalOutbound(tx, tenantId, conversation.id, { preview: preview(text || `[${input.type ?? 'text'}]`), at, now });
  await emit(tx, now, tenantId, 'message.created', { messageId, conversationId: conversation.id, direction: 'outbound', channel: channel.kind, type: messageType(input.type) });
  return { conversationId: conversation.id, messageId, contactId: contact.id };
}

/** The message.created `type` of a stored message type. */
export function messageType(type: string | undefined): (typeof MESSAGE_TYPES)[number] {
  return MESSAGE_TYPES.find((known) => known === type) ?? 'unsupported';
}

/** The admin side of the inbox: what arrives from channels and what the dashboard's operators do. */
export class InboxService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /**
   * A guest's message arrives: contact and conversation found or created, obligation raised, message.created
   * emitted. `receivedAt` imports earlier history: the message, the last activity and the customer-service
   * window use it (never a time in the future).
   */
  async receiveInbound(tenantId: string, input: { channelId: string; contact: ContactInput; text: string; receivedAt?: string }) {
    const now = this.clock.now();
    const at = input.receivedAt === undefined ? now : new Date(input.receivedAt);
    if (at.getTime() > now.getTime()) throw invalid('body.receivedAt', 'must not be in the future');
    return this.db.transaction(async (tx) => {
      const channel = await channelRepo.get(tx, tenantId, input.channelId);
      if (!channel) throw notFound('channel');
      const written = await writeInbound(tx, channel, { contact: input.contact, text: input.text, at, type: 'text', source: 'channel' }, now);
      // Without a provider message id nothing dedupes, so the message is always written.
      return written!;
    });
  }

  /** Creates (or finds, by phone or handle) a contact and records its consent and opt-out. */
  async createContact(tenantId: string, input: ContactInput & { consent?: boolean; optedOut?: boolean }) {
    return this.db.transaction(async (tx) => {
      const now = this.clock.now();
      const contact = await ensureContact(tx, tenantId, input, now);
      const updated = await conversationRepo.updateContact(tx, tenantId, contact.id, { consent: input.consent, optedOut: input.optedOut }, now);
      return contactView(updated!);
    });
  }

  async updateContact(tenantId: string, contactId: string, patch: { name?: string | null; consent?: boolean; optedOut?: boolean }) {
    return this.db.transaction(async (tx) => {
      const contact = await conversationRepo.updateContact(tx, tenantId, contactId, patch, this.clock.now());
      if (!contact) throw notFound('contact');
      return contactView(contact);
    });
  }

  async setOwner(tenantId: string, conversationId: string, ownerOperatorId: string | null, actor: Actor) {
    return this.db.transaction(async (tx) => {
      await requireConversation(tx, tenantId, conversationId, true);
      if (ownerOperatorId !== null) await requireActiveOperator(tx, tenantId, ownerOperatorId);
      const now = this.clock.now();
      await conversationRepo.setOwner(tx, tenantId, conversationId, ownerOperatorId, now);
      await recordActivity(tx, { tenantId, conversationId, kind: 'conversation.owner_changed', actor, data: { ownerOperatorId }, now });
      return conversationView((await conversationRepo.get(tx, tenantId, conversationId))!);
    });
  }

  /** Opens, assigns or resolves the human handoff, emitting conversation.handoff.updated. */
  async handoff(tenantId: string, conversationId: string, input: { action: 'open' | 'assign' | 'resolve'; operatorId?: string | null }, actor: Actor) {
    return this.db.transaction(async (tx) => {
      const conversation = await requireConversation(tx, tenantId, conversationId, true);
      if (input.operatorId) await requireActiveOperator(tx, tenantId, input.operatorId);
      const now = this.clock.now();
      let handoffId = conversation.open_handoff_id;
      let action: 'opened' | 'assigned' | 'resolved';
      if (input.action === 'open') {
        if (handoffId) throw conflict('a handoff is already open for this conversation');
        handoffId = (await caseRepo.insertHandoff(tx, { id: newId('hof'), tenantId, conversationId, operatorId: input.operatorId ?? null, now })).id;
        await conversationRepo.setOpenCases(tx, tenantId, conversationId, { handoffId }, now);
        action = 'opened';
      } else {
        if (!handoffId) throw conflict('no handoff is open for this conversation');
        if (input.action === 'assign') {
          if (input.operatorId === undefined) throw invalid('body.operatorId', 'is required to assign (null unassigns)');
          await caseRepo.updateHandoff(tx, tenantId, handoffId, { operatorId: input.operatorId }, now);
          action = 'assigned';
        } else {
          await caseRepo.updateHandoff(tx, tenantId, handoffId, { resolve: true }, now);
          await conversationRepo.setOpenCases(tx, tenantId, conversationId, { handoffId: null }, now);
          action = 'resolved';
        }
      }
      await recordActivity(tx, { tenantId, conversationId, kind: `handoff.${action}`, actor, data: { caseId: handoffId }, now });
      await emit(tx, now, tenantId, 'conversation.handoff.updated', { conversationId, caseId: handoffId, action });
      return handoffView((await caseRepo.getHandoff(tx, tenantId, handoffId))!);
    });
  }
}
