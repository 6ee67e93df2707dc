import { MESSAGE_TYPES } from '../events/types.js';
import { cutText } from '../util/text.js';
import { invalid } from '../errors.js';
import { normalizePhone } from './phone.js';
import type { MessageContent } from './repo.js';

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

/** One inbound message as a channel delivers it (admin simulation or a provider callback). */
export interface InboundInput extends Omit<MessageContent, 'channelId'> {
  contact: ContactInput;
  /** Body or caption; '' when there is none. */
  text: string;
  /** When the guest sent it (the provider's timestamp): the message time and the start of the customer-service window. */
  at: Date;
}

/** The message.created `type` of a stored message type. */
export function messageType(type: string | undefined): (typeof MESSAGE_TYPES)[number] {
  return MESSAGE_TYPES.find((known) => known === type) ?? 'unsupported';
}
