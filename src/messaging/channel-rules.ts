import type { ChannelKind } from '../channels/repo.js';
import { conflict, type DomainError } from '../errors.js';

const HOUR_MS = 3_600_000;

/**
 * How long after the contact's last inbound message a free-form (non-template) message may be sent, per channel:
 * WhatsApp's customer-service window and Meta's standard messaging window on Messenger and Instagram are 24 hours.
 * Webchat is our own widget: no window. (docs/decisions.md, "Replies".)
 */
export const REPLY_WINDOW_HOURS: Record<ChannelKind, number | null> = { whatsapp: 24, messenger: 24, instagram: 24, webchat: null };

/** The refusal of a free-form reply outside the channel's window, or undefined when the reply is allowed. */
export function replyWindowRefusal(kind: ChannelKind, lastInboundAt: Date | null, now: Date): DomainError | undefined {
  const hours = REPLY_WINDOW_HOURS[kind];
  if (hours === null) return undefined;
  if (lastInboundAt && now.getTime() - lastInboundAt.getTime() < hours * HOUR_MS) return undefined;
  const closedAt = lastInboundAt ? new Date(lastInboundAt.getTime() + hours * HOUR_MS).toISOString() : undefined;
  return conflict(
    lastInboundAt
      ? `the ${hours}-hour window after the contact's last message closed at ${closedAt}; start the conversation again with a template`
      : `the contact has not written on this conversation, so no ${hours}-hour window is open; start the conversation with a template`,
    {
      reason: 'outside_customer_service_window',
      channel: kind,
      windowHours: hours,
      ...(lastInboundAt ? { lastInboundAt: lastInboundAt.toISOString(), windowClosedAt: closedAt } : {}),
    },
  );
}
