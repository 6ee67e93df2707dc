import { defineOperation, replayable } from '../operations/define.js';
import { RequestParams, RequestStatusRecord, StartAccepted, StartBody, TemplateReadiness, TemplateStatusQuery } from './schema.js';
import type { MessagingService } from './service.js';

/** What the messaging operations call. */
export interface MessagingOperationServices {
  messaging: MessagingService;
}

const at = '2026-11-24T10:00:00.000Z';
const accepted = { conversationId: 'cnv_7h2k9m4p1q8r3s6t0v5w', replyId: 'msg_0a9s8d7f6g5h4j3k2l1z', requestEventId: 'req_6y5t4r3e2w1q0p9o8i7u' };
const statusRecord = { requestEventId: accepted.requestEventId, status: 'delivered' as const, conversationId: accepted.conversationId, replyId: accepted.replyId, channel: 'whatsapp', createdAt: at, updatedAt: at };

export const messagingOperations = [
  defineOperation({
    area: 'messaging',
    tag: 'Conversations',
    operationId: 'getWhatsappTemplateStatus',
    sdk: 'conversations.whatsappTemplateStatus',
    method: 'GET',
    path: '/conversations/start/whatsapp-template-status',
    summary: 'Readiness of the WhatsApp conversation-start template',
    description: 'Per-locale readiness of the channel’s conversation-start template, as last stored (never refreshed by this call). Check it before startConversation: only a ready locale can start a conversation.',
    scopes: ['conversations:read'],
    query: TemplateStatusQuery,
    status: 200,
    response: TemplateReadiness,
    errors: [404],
    examples: { response: { channelId: 'chn_4f5g6h7j8k9l0z1x2c3v', templateName: 'guest_welcome', category: 'UTILITY', locales: [{ locale: 'en_US', status: 'APPROVED', ready: true, lastFetchedAt: at }] } },
    handler: (s: MessagingOperationServices, ctx, input) => s.messaging.templateStatus(ctx, input),
  }),
  defineOperation({
    area: 'messaging',
    tag: 'Conversations',
    operationId: 'startConversation',
    sdk: 'conversations.start',
    method: 'POST',
    path: '/conversations/start',
    summary: 'Start a conversation with a WhatsApp template message',
    description:
      'Sends the channel’s approved conversation-start template to a phone number. Queued, not delivered: follow requestEventId with getMessageRequestStatus or the message.delivery.updated webhook. Needs an available WhatsApp channel, a ready locale, recipient consent and no opt-out. Reuse the same Idempotency-Key when retrying; a different body under the same key is 409.',
    scopes: ['conversations:write'],
    body: StartBody,
    status: 202,
    response: StartAccepted,
    errors: [
      404,
      { status: 400, code: 'M2M_INVALID_REQUEST', reason: 'channel_not_whatsapp', message: 'the channel is not a WhatsApp channel', details: { issues: [{ path: 'body.channelId', message: 'is not a WhatsApp channel' }] } },
      { status: 400, code: 'M2M_INVALID_REQUEST', reason: 'channel_unavailable', message: 'the WhatsApp channel is not available for sending', details: { issues: [{ path: 'body.channelId', message: 'is not available' }] } },
      {
        status: 400,
        code: 'M2M_INVALID_REQUEST',
        reason: 'template_not_prepared',
        message: 'the conversation-start template is not prepared for locale es_MX (status pending); finish its setup in the dashboard',
        details: { locale: 'es_MX', status: 'pending', issues: [{ path: 'body.locale', message: 'template not prepared for es_MX' }] },
      },
      { status: 409, code: 'M2M_CONFLICT', reason: 'recipient_no_consent', message: 'the recipient has not given consent to be contacted' },
      { status: 409, code: 'M2M_CONFLICT', reason: 'recipient_opted_out', message: 'the recipient has opted out' },
      {
        status: 409,
        code: 'M2M_CONFLICT',
        reason: 'unreconciled_failed_attempt',
        message: 'a previous send to this recipient failed; reconcile it before sending again',
        details: { requestEventId: 'req_6y5t4r3e2w1q0p9o8i7u' },
      },
    ],
    idempotency: { key: 'required', by: 'service' },
    hints: { destructive: true, openWorld: true },
    examples: { request: { channelId: 'chn_4f5g6h7j8k9l0z1x2c3v', recipientPhone: '+525512345678', locale: 'es_MX', messageText: 'Hola Ana, ¿te ayudamos con tu llegada?', contactName: 'Ana Martínez' }, response: accepted },
    handler: async (s: MessagingOperationServices, ctx, input) => replayable(await s.messaging.start(ctx, input)),
  }),
  defineOperation({
    area: 'messaging',
    tag: 'Messages',
    operationId: 'getMessageRequestStatus',
    sdk: 'messageRequests.status',
    method: 'GET',
    path: '/message-requests/{requestEventId}/status',
    summary: 'Status of a queued send',
    description: 'The delivery status of a send (queued, sent, delivered, read or failed) by the requestEventId a send returned, with the provider error when it failed.',
    scopes: ['messages:read'],
    params: RequestParams,
    status: 200,
    response: RequestStatusRecord,
    errors: [404],
    examples: { response: statusRecord },
    handler: (s: MessagingOperationServices, ctx, input) => s.messaging.requestStatus(ctx, input),
  }),
  defineOperation({
    area: 'messaging',
    tag: 'Messages',
    operationId: 'reconcileMessageRequest',
    sdk: 'messageRequests.reconcile',
    method: 'POST',
    path: '/message-requests/{requestEventId}/reconcile',
    summary: 'Acknowledge a failed send',
    description: 'Acknowledges a failed send so that new sends to its recipient are allowed again. Only a failed send can be reconciled (409 otherwise).',
    scopes: ['conversations:write'],
    params: RequestParams,
    status: 200,
    response: RequestStatusRecord,
    errors: [404, { status: 409, code: 'M2M_CONFLICT', message: 'only a failed send can be reconciled; this one is delivered', details: { status: 'delivered' } }],
    extension: true,
    hints: { idempotent: true },
    examples: { response: { ...statusRecord, status: 'failed', error: { code: 'recipient_unreachable', message: 'The number is not on WhatsApp' }, reconciled: true } },
    handler: (s: MessagingOperationServices, ctx, input) => s.messaging.reconcile(ctx, input),
  }),
];
