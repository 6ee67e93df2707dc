import { request, resolveConfig, type ClientOptions, type RequestOptions, type ResolvedClientConfig } from './request.js';
import { Webhooks } from './webhooks.js';

/**
 * Client of the tenant-scoped M2M API.
 *
 * ```ts
 * const m2m = new M2MClient({ apiKey: process.env.M2M_API_KEY!, baseUrl: 'https://api.example.com/m2m/v1' });
 * const sub = await m2m.webhooks.create({ url: 'https://hooks.example.com/m2m', events: ['message.created'] });
 * ```
 */
export class M2MClient {
  readonly webhooks: Webhooks;
  readonly #config: ResolvedClientConfig;

  constructor(options: ClientOptions) {
    this.#config = resolveConfig(options);
    this.webhooks = new Webhooks(this.#config);
  }

  /**
   * Escape hatch for operations without a resource method yet; same auth, timeout, retries and
   * errors. Build `path` with the exported `path` tag so segments are URL-encoded.
   */
  request<T = unknown>(options: RequestOptions): Promise<T> {
    return request<T>(this.#config, options);
  }
}

export {
  ApiError,
  ApiConnectionError,
  ApiTimeoutError,
  path,
  encodeSegment,
  request,
  resolveConfig,
} from './request.js';
export type {
  CallOptions,
  ClientOptions,
  FetchLike,
  HttpMethod,
  QueryValue,
  RequestOptions,
  ResolvedClientConfig,
} from './request.js';

export { Webhooks } from './webhooks.js';
export type {
  WebhookCreateParams,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookDeliveryListParams,
  WebhookDeliveryStatus,
  WebhookEventType,
  WebhookSubscription,
  WebhookSubscriptionList,
  WebhookSubscriptionWithSecret,
  WebhookUpdateParams,
} from './webhooks.js';

export {
  DEFAULT_TOLERANCE_SECONDS,
  EVENT_ID_HEADER,
  SIGNATURE_HEADER,
  WebhookVerificationError,
  signWebhook,
  verifyWebhook,
  verifyWebhookSignature,
} from './verify.js';
export type { VerifyOptions, WebhookEvent, WebhookVerificationFailureReason } from './verify.js';
