import { createHmac, timingSafeEqual } from 'node:crypto';
import { loadUndici } from '../../net/undici.js';
import { ProviderError, type ChannelProvider, type DeliveryStatus, type SendAccepted, type SendRequest } from './types.js';

export interface WhatsAppOptions {
  graphBaseUrl: string;
  apiVersion: string;
  accessToken: string;
  timeoutMs: number;
}

/** WhatsApp Cloud API: template messages through the Graph API. */
export class WhatsAppCloudProvider implements ChannelProvider {
  readonly name = 'whatsapp' as const;

  constructor(private readonly options: WhatsAppOptions) {}

  async send(message: SendRequest, signal: AbortSignal): Promise<SendAccepted> {
    if (message.channelKind !== 'whatsapp') throw new ProviderError('unsupported_channel', `the WhatsApp provider cannot send on ${message.channelKind}`, false);
    if (!message.senderRef) throw new ProviderError('sender_not_configured', 'the channel has no WhatsApp phone-number id (providerRef)', false);
    if (!message.to) throw new ProviderError('recipient_missing', 'the recipient has no phone number', false);
    const url = `${this.options.graphBaseUrl}/${this.options.apiVersion}/${encodeURIComponent(message.senderRef)}/messages`;
    const to = message.to.replace(/^\+/, '');
    const body = JSON.stringify(
      message.template
        ? {
            messaging_product: 'whatsapp',
            to,
            type: 'template',
            template: {
              name: message.template.name,
              language: { code: message.template.locale },
              components: [{ type: 'body', parameters: [{ type: 'text', text: message.text }] }],
            },
          }
        : { messaging_product: 'whatsapp', to, type: 'text', text: { body: message.text } },
    );
    const { request } = await loadUndici();
    let response;
    try {
      response = await request(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.options.accessToken}`, 'content-type': 'application/json' },
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(this.options.timeoutMs)]),
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
      });
    } catch (error) {
      const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError' || /timeout/i.test(String((error as { code?: string }).code)));
      throw new ProviderError(timedOut ? 'provider_timeout' : 'provider_unreachable', timedOut ? 'the provider did not answer in time' : 'could not reach the provider', true);
    }
    const text = await response.body.text().catch(() => '');
    if (response.statusCode >= 200 && response.statusCode < 300) {
      // A 2xx means the message may be out: never retry it, even when the body is unusable.
      let id: string | undefined;
      try {
        id = (JSON.parse(text) as { messages?: Array<{ id?: string }> } | null)?.messages?.[0]?.id;
      } catch {
        // not JSON: handled as a missing id below
      }
      if (!id) throw new ProviderError('provider_bad_response', 'the provider accepted the message without an id', false);
      return { providerMessageId: id };
    }
    const retryable = response.statusCode >= 500 || response.statusCode === 429;
    let detail = '';
    try {
      detail = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? '';
    } catch {
      // not JSON: keep the status only
    }
    throw new ProviderError(retryable ? 'provider_unavailable' : 'provider_rejected', `provider answered ${response.statusCode}${detail ? `: ${detail.slice(0, 200)}` : ''}`, retryable);
  }
}

/** Checks `X-Hub-Signature-256: sha256=<hex HMAC of the raw body with the app secret>`. */
export function verifyHubSignature(appSecret: string, rawBody: Buffer, header: string | undefined): boolean {
  if (!header?.startsWith('sha256=')) return false;
  const expected = Buffer.from(createHmac('sha256', appSecret).update(rawBody).digest('hex'));
  const given = Buffer.from(header.slice('sha256='.length));
  return expected.length === given.length && timingSafeEqual(expected, given);
}

export interface StatusUpdate {
  providerMessageId: string;
  status: DeliveryStatus;
  error?: { code: string; message: string };
}

/** The status updates in a Cloud API webhook payload (entry[].changes[].value.statuses[]). */
export function parseStatusCallback(payload: unknown): StatusUpdate[] {
  const updates: StatusUpdate[] = [];
  const entries = (payload as { entry?: unknown[] })?.entry;
  if (!Array.isArray(entries)) return updates;
  for (const entry of entries) {
    for (const change of (entry as { changes?: unknown[] }).changes ?? []) {
      const statuses = (change as { value?: { statuses?: unknown[] } }).value?.statuses ?? [];
      for (const raw of statuses) {
        const s = raw as { id?: string; status?: string; errors?: Array<{ code?: number | string; title?: string; message?: string }> };
        if (!s.id || !['sent', 'delivered', 'read', 'failed'].includes(s.status ?? '')) continue;
        const err = s.errors?.[0];
        updates.push({
          providerMessageId: s.id,
          status: s.status as DeliveryStatus,
          ...(s.status === 'failed' ? { error: { code: `whatsapp_${err?.code ?? 'unknown'}`, message: err?.message ?? err?.title ?? 'failed at the provider' } } : {}),
        });
      }
    }
  }
  return updates;
}
