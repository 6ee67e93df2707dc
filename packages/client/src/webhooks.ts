import { path, request, type CallOptions, type ResolvedClientConfig } from './request.js';

/** Event types the API emits. Other strings are accepted for forward compatibility. */
export type WebhookEventType =
  | 'message.created'
  | 'message.delivery.updated'
  | 'conversation.handoff.updated'
  | 'crm.opportunity.created'
  | 'crm.opportunity.updated'
  | (string & {});

export interface WebhookSubscription {
  subscriptionId: string;
  url: string;
  events: WebhookEventType[];
  active: boolean;
  description?: string;
  /** The API key that owns the subscription (the last key that created or updated it). */
  ownerApiKeyId: string;
  createdAt: string;
  updatedAt: string;
  /** Signing secret (`whsec_…`): present only in the responses of create and rotateSecret. */
  secret?: string;
}

/** A subscription as returned by create / rotateSecret: the secret is always present. */
export type WebhookSubscriptionWithSecret = WebhookSubscription & { secret: string };

export interface WebhookSubscriptionList {
  subscriptions: WebhookSubscription[];
}

export interface WebhookCreateParams {
  /** Public HTTPS URL on port 443. */
  url: string;
  events: WebhookEventType[];
  description?: string;
}

export interface WebhookUpdateParams {
  url?: string;
  events?: WebhookEventType[];
  active?: boolean;
  description?: string;
}

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed' | 'canceled';

export interface WebhookDelivery {
  deliveryId: string;
  eventId: string;
  subscriptionId: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  nextAttemptAt?: string;
  httpStatus?: number;
  failureCode?: string;
  deliveredAt?: string;
  createdAt?: string;
  updatedAt?: string;
}

export interface WebhookDeliveryListParams {
  status?: WebhookDeliveryStatus;
  /** Page size. */
  limit?: number;
  /** `nextCursor` of the previous page; the other filters must stay the same. */
  cursor?: string;
}

export interface WebhookDeliveryList {
  /** Newest first. */
  deliveries: WebhookDelivery[];
  nextCursor?: string;
  hasMore: boolean;
}

/** Accepts both a bare record and `{[key]: record}` (the API wraps some single records). */
function unwrap<T>(value: unknown, key: string): T {
  if (typeof value === 'object' && value !== null && key in value) {
    const inner = (value as Record<string, unknown>)[key];
    if (typeof inner === 'object' && inner !== null && !Array.isArray(inner)) return inner as T;
  }
  return value as T;
}

/**
 * Webhook subscriptions and their deliveries (`/webhooks…`).
 *
 * Retries: reads, PATCH and DELETE are retried on 429 / 5xx / network errors. `rotateSecret` and
 * `retryDelivery` are safe to repeat and are sent with an automatic Idempotency-Key. `create` is
 * retried only on 429 unless you pass `{ idempotencyKey }`: a 5xx or dropped connection may mean
 * the subscription was created, and a blind retry could create a second one.
 */
export class Webhooks {
  readonly #config: ResolvedClientConfig;

  constructor(config: ResolvedClientConfig) {
    this.#config = config;
  }

  /** `POST /webhooks` — the response carries the signing secret (shown only here and on rotation). */
  async create(params: WebhookCreateParams, options?: CallOptions): Promise<WebhookSubscriptionWithSecret> {
    const body: Record<string, unknown> = { url: params.url, events: params.events };
    if (params.description !== undefined) body.description = params.description;
    const res = await request<unknown>(this.#config, { ...options, method: 'POST', path: '/webhooks', body });
    return unwrap<WebhookSubscriptionWithSecret>(res, 'subscription');
  }

  /** `GET /webhooks` */
  async list(options?: CallOptions): Promise<WebhookSubscriptionList> {
    return request<WebhookSubscriptionList>(this.#config, { ...options, method: 'GET', path: '/webhooks' });
  }

  /** `GET /webhooks/{subscriptionId}` */
  async get(subscriptionId: string, options?: CallOptions): Promise<WebhookSubscription> {
    const res = await request<unknown>(this.#config, {
      ...options,
      method: 'GET',
      path: path`/webhooks/${subscriptionId}`,
    });
    return unwrap<WebhookSubscription>(res, 'subscription');
  }

  /**
   * `PATCH /webhooks/{subscriptionId}` — the calling key must hold the read scopes of the events
   * again, and becomes the owner of the subscription.
   */
  async update(subscriptionId: string, params: WebhookUpdateParams, options?: CallOptions): Promise<WebhookSubscription> {
    const body: Record<string, unknown> = {};
    for (const key of ['url', 'events', 'active', 'description'] as const) {
      if (params[key] !== undefined) body[key] = params[key];
    }
    const res = await request<unknown>(this.#config, {
      ...options,
      method: 'PATCH',
      path: path`/webhooks/${subscriptionId}`,
      body,
    });
    return unwrap<WebhookSubscription>(res, 'subscription');
  }

  /** `DELETE /webhooks/{subscriptionId}` — pending deliveries are canceled. */
  async delete(subscriptionId: string, options?: CallOptions): Promise<void> {
    await request<unknown>(this.#config, { ...options, method: 'DELETE', path: path`/webhooks/${subscriptionId}` });
  }

  /** `POST /webhooks/{subscriptionId}/rotate-secret` — the new secret applies to future attempts at once. */
  async rotateSecret(subscriptionId: string, options?: CallOptions): Promise<WebhookSubscriptionWithSecret> {
    const res = await request<unknown>(this.#config, {
      ...options,
      method: 'POST',
      path: path`/webhooks/${subscriptionId}/rotate-secret`,
      idempotent: true,
    });
    return unwrap<WebhookSubscriptionWithSecret>(res, 'subscription');
  }

  /** `GET /webhooks/{subscriptionId}/deliveries?status=&limit=&cursor=` — newest first. */
  async listDeliveries(
    subscriptionId: string,
    params: WebhookDeliveryListParams = {},
    options?: CallOptions,
  ): Promise<WebhookDeliveryList> {
    return request<WebhookDeliveryList>(this.#config, {
      ...options,
      method: 'GET',
      path: path`/webhooks/${subscriptionId}/deliveries`,
      query: { status: params.status, limit: params.limit, cursor: params.cursor },
    });
  }

  /** Iterates over every delivery, following `nextCursor` page by page. */
  async *iterateDeliveries(
    subscriptionId: string,
    params: Omit<WebhookDeliveryListParams, 'cursor'> = {},
    options?: CallOptions,
  ): AsyncGenerator<WebhookDelivery, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listDeliveries(subscriptionId, { ...params, cursor }, options);
      yield* page.deliveries;
      cursor = page.hasMore ? page.nextCursor : undefined;
    } while (cursor);
  }

  /** `GET /webhooks/{subscriptionId}/deliveries/{deliveryId}` (response `{delivery}`). */
  async getDelivery(subscriptionId: string, deliveryId: string, options?: CallOptions): Promise<WebhookDelivery> {
    const res = await request<unknown>(this.#config, {
      ...options,
      method: 'GET',
      path: path`/webhooks/${subscriptionId}/deliveries/${deliveryId}`,
    });
    return unwrap<WebhookDelivery>(res, 'delivery');
  }

  /**
   * `POST /webhooks/{subscriptionId}/deliveries/{deliveryId}/retry` — starts a new attempt cycle
   * for an exhausted failure (same eventId, so receivers deduplicate it).
   */
  async retryDelivery(subscriptionId: string, deliveryId: string, options?: CallOptions): Promise<WebhookDelivery> {
    const res = await request<unknown>(this.#config, {
      ...options,
      method: 'POST',
      path: path`/webhooks/${subscriptionId}/deliveries/${deliveryId}/retry`,
      idempotent: true,
    });
    return unwrap<WebhookDelivery>(res, 'delivery');
  }
}
