import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { conflict, invalid, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { channelRepo, type ChannelRow } from '../channels/repo.js';
import { emit } from '../webhooks/events.js';
import type { Actor } from '../context.js';
import { conversationRepo, type ContactRow, type ConversationRow } from './repo.js';
import { contactAddress, messageType, preview, type ContactInput, type InboundInput } from './inbound-input.js';
import { writeInboundBatch } from './inbound-batch.js';
import { caseRepo } from './case-repo.js';
import { recordActivity, requireActiveOperator, requireConversation } from './service.js';
import { contactView, conversationView, handoffView } from './views.js';

export { contactAddress, messageType, preview, type ContactInput, type InboundInput };

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

/**
 * One inbound message, whoever delivers it (the admin simulation, the webchat widget), in the caller's transaction:
 * a group of one for writeInboundBatch (src/conversations/inbound-batch.ts), the one home of what an inbound
 * message does. Undefined when the channel already has this provider message id (a redelivery: nothing written).
 */
export async function writeInbound(tx: Tx, channel: ChannelRow, input: InboundInput, now: Date): Promise<{ conversationId: string; messageId: string; contactId: string } | undefined> {
  const [written] = await writeInboundBatch(tx, [{ channel, input }], now);
  return written && { conversationId: written.conversationId, messageId: written.messageId, contactId: written.contactId };
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
