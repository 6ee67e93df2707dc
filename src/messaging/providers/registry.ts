import { ChannelSendError, type ChannelConnection, type ChannelProvider, type OutboundRequest, type SendResult, type UploadFile, type UploadResult } from '../../channels/providers/types.js';

/** One sending half per provider (DESIGN.md habit 20); each serves every channel of its provider. */
export interface ProviderRegistry {
  sandbox: ChannelProvider<'sandbox'>;
  whatsapp_cloud?: ChannelProvider<'whatsapp_cloud'>;
  messenger?: ChannelProvider<'messenger'>;
  instagram?: ChannelProvider<'instagram'>;
  webchat?: ChannelProvider<'webchat'>;
}

function missing(provider: string): never {
  throw new ChannelSendError('provider_not_supported', `this server cannot send through ${provider} yet`, { retryable: false });
}

/** Hands `request` to the provider of `connection` (the channel's own). */
export function sendThrough(registry: ProviderRegistry, request: OutboundRequest, connection: ChannelConnection, signal: AbortSignal): Promise<SendResult> {
  switch (connection.provider) {
    case 'sandbox':
      return registry.sandbox.send(request, connection, signal);
    case 'whatsapp_cloud':
      return (registry.whatsapp_cloud ?? missing(connection.provider)).send(request, connection, signal);
    case 'messenger':
      return (registry.messenger ?? missing(connection.provider)).send(request, connection, signal);
    case 'instagram':
      return (registry.instagram ?? missing(connection.provider)).send(request, connection, signal);
    case 'webchat':
      return (registry.webchat ?? missing(connection.provider)).send(request, connection, signal);
  }
}

/** Uploads a file through the provider of `connection`, for a later `media` request; refused when that provider takes no uploads. */
export function uploadThrough(registry: ProviderRegistry, file: UploadFile, connection: ChannelConnection, signal: AbortSignal): Promise<UploadResult> {
  const refuse = (): never => {
    throw new ChannelSendError('media_not_supported', `this server cannot send attachments through ${connection.provider}`, { retryable: false });
  };
  switch (connection.provider) {
    case 'sandbox':
      return registry.sandbox.upload ? registry.sandbox.upload(file, connection, signal) : refuse();
    case 'whatsapp_cloud': {
      const provider = registry.whatsapp_cloud ?? missing(connection.provider);
      return provider.upload ? provider.upload(file, connection, signal) : refuse();
    }
    case 'messenger': {
      const provider = registry.messenger ?? missing(connection.provider);
      return provider.upload ? provider.upload(file, connection, signal) : refuse();
    }
    case 'instagram': {
      const provider = registry.instagram ?? missing(connection.provider);
      return provider.upload ? provider.upload(file, connection, signal) : refuse();
    }
    case 'webchat': {
      const provider = registry.webchat ?? missing(connection.provider);
      return provider.upload ? provider.upload(file, connection, signal) : refuse();
    }
  }
}
