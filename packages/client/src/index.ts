import { Api } from './generated.js';
import { request, resolveConfig, type ClientOptions, type RequestOptions, type ResolvedClientConfig } from './request.js';

/**
 * Client of the tenant-scoped M2M API: a method for every operation, grouped by resource, generated from the
 * server's operation catalogue (src/generated.ts).
 *
 * ```ts
 * const m2m = new M2MClient({ apiKey: process.env.M2M_API_KEY!, baseUrl: 'https://api.example.com/m2m/v1' });
 * const sub = await m2m.webhooks.create({ url: 'https://hooks.example.com/m2m', events: ['message.created'] });
 * for await (const item of m2m.knowledge.items.iterate({ status: 'active' })) console.log(item.title);
 * ```
 */
export class M2MClient extends Api {
  readonly #config: ResolvedClientConfig;

  constructor(options: ClientOptions) {
    const config = resolveConfig(options);
    super(config);
    this.#config = config;
  }

  /** Escape hatch for a raw call: same auth, timeout, retries and errors. Build `path` with the `path` tag. */
  request<T = unknown>(options: RequestOptions): Promise<T> {
    return request<T>(this.#config, options);
  }
}

export * from './generated.js';
export { callOperation, iterateOperation } from './operation.js';
export type { OperationMeta, Page } from './operation.js';
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
