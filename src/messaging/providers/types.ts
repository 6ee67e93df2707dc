/** What a channel provider needs to send one template message. */
export interface SendRequest {
  requestEventId: string;
  channelKind: string;
  /** The provider's id of the sending number (WhatsApp phone-number id), when it has one. */
  senderRef: string | null;
  /** Recipient phone (E.164) when the channel addresses by phone. */
  to: string | null;
  conversationId: string;
  /** A template message (conversation start); absent for a reply inside an open conversation. */
  template?: { name: string; locale: string };
  text: string;
}

export interface SendAccepted {
  providerMessageId: string;
}

/** A provider refusal or failure; `retryable` says whether trying again may succeed. */
export class ProviderError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

export type DeliveryStatus = 'sent' | 'delivered' | 'read' | 'failed';

export interface ChannelProvider {
  readonly name: 'sandbox' | 'whatsapp';
  /** Hands the message to the provider; resolves once it accepted it. */
  send(request: SendRequest, signal: AbortSignal): Promise<SendAccepted>;
}
