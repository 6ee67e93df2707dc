import { newId } from '../../ids.js';
import type { ChannelProvider, SandboxConnection, SendResult, UploadResult } from '../../channels/providers/types.js';

/**
 * The sandbox provider: accepts every send (and upload) at once. Status then changes only through the admin
 * provider-status route, exactly as a real provider's callback would.
 */
export class SandboxProvider implements ChannelProvider<'sandbox'> {
  readonly provider = 'sandbox' as const;

  async send(_request: unknown, _connection: SandboxConnection): Promise<SendResult> {
    return { providerMessageId: newId('sbx') };
  }

  async upload(): Promise<UploadResult> {
    return { providerMediaId: newId('sbm') };
  }
}
