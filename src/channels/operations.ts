import { Type } from 'typebox';
import { DateTime } from '../http/schemas.js';
import { defineOperation } from '../operations/define.js';
import type { TenantService } from '../tenants/service.js';
import { ChannelEnvelope, ChannelList, ChannelParams, ChannelTemplates } from './schema.js';
import type { ChannelService } from './service.js';

/** What the channel and property reads call. */
export interface ChannelOperationServices {
  channels: ChannelService;
}
export interface PropertyOperationServices {
  tenants: TenantService;
}

const common = { area: 'channels', tag: 'Channels', extension: true } as const;
const at = '2026-11-24T10:00:00.000Z';
const channel = {
  channelId: 'chn_4f5g6h7j8k9l0z1x2c3v',
  kind: 'whatsapp' as const,
  provider: 'whatsapp_cloud' as const,
  name: 'Front desk WhatsApp',
  phoneNumber: '+525512345678',
  available: true,
  connection: { status: 'connected' as const },
  createdAt: at,
  updatedAt: at,
};

const PropertyList = Type.Object(
  { properties: Type.Array(Type.Object({ propertyId: Type.String(), name: Type.String(), createdAt: DateTime }, { additionalProperties: false })) },
  { additionalProperties: false },
);

export const channelOperations = [
  defineOperation({
    ...common,
    operationId: 'listChannels',
    sdk: 'channels.list',
    method: 'GET',
    path: '/channels',
    summary: 'List the business’s messaging channels',
    description:
      'Every messaging channel of the business (WhatsApp numbers, Messenger pages, Instagram accounts, webchat widgets) with its provider and connection status. Use a channelId from here to start a conversation or to check its templates.',
    scopes: ['channels:read'],
    status: 200,
    response: ChannelList,
    examples: { response: { channels: [channel] } },
    handler: (s: ChannelOperationServices, ctx) => s.channels.list(ctx),
  }),
  defineOperation({
    ...common,
    operationId: 'getChannel',
    sdk: 'channels.get',
    method: 'GET',
    path: '/channels/{channelId}',
    summary: 'Read a channel',
    description: 'One messaging channel of the business with its provider and connection status.',
    scopes: ['channels:read'],
    params: ChannelParams,
    status: 200,
    response: ChannelEnvelope,
    errors: [404],
    examples: { response: { channel } },
    handler: (s: ChannelOperationServices, ctx, input) => s.channels.get(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'listChannelTemplates',
    sdk: 'channels.templates',
    method: 'GET',
    path: '/channels/{channelId}/templates',
    summary: 'Message templates of a channel and their readiness',
    description:
      'Every message template stored for the channel with its per-locale approval status and readiness, as last fetched from the provider (this call never refreshes them). Only a ready locale can start a conversation.',
    scopes: ['channels:read'],
    params: ChannelParams,
    status: 200,
    response: ChannelTemplates,
    errors: [404],
    examples: { response: { templates: [{ templateName: 'guest_welcome', category: 'UTILITY', locales: [{ locale: 'en_US', status: 'APPROVED', ready: true, lastFetchedAt: at }] }] } },
    handler: (s: ChannelOperationServices, ctx, input) => s.channels.templates(ctx, input),
  }),
  defineOperation({
    area: 'knowledge',
    tag: 'Properties',
    extension: true,
    operationId: 'listProperties',
    sdk: 'properties.list',
    method: 'GET',
    path: '/properties',
    summary: 'List the business’s properties',
    description: 'Every property (hotel, building) of the business. Use a propertyId as the propertyFilter of knowledge lists, or to tell which property a reservation belongs to.',
    scopes: ['properties:read'],
    status: 200,
    response: PropertyList,
    examples: { response: { properties: [{ propertyId: 'prop_1a2b3c4d5e6f7g8h9j0k', name: 'Hotel Sol Cancún', createdAt: at }] } },
    handler: (s: PropertyOperationServices, ctx) => s.tenants.listProperties(ctx),
  }),
];
