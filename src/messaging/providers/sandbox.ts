import { newId } from '../../ids.js';
import type { ChannelProvider, SendAccepted, SendRequest } from './types.js';

/**
 * The default provider: accepts every send at once. Status then changes only through the admin
 * provider-status route, exactly as a real provider's callback would.
 */
export class SandboxProvider implements ChannelProvider {
  readonly name = 'sandbox' as const;

  async send(_request: SendRequest): Promise<SendAccepted> {
    return { providerMessageId: newId('sbx') };
  }
}
