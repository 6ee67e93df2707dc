import { iso } from '../util/time.js';
import type { AttemptRow, DeliveryListRow, DeliveryRow, SubscriptionRow } from './repo.js';

/** Rows as the API answers them (the operations' response schemas in schema.ts). */
export function subscriptionView(row: SubscriptionRow, secret?: string) {
  return {
    subscriptionId: row.id,
    url: row.url,
    events: row.events,
    active: row.active,
    ...(row.disabled_reason !== null ? { disabledReason: row.disabled_reason } : {}),
    ...(row.description !== null ? { description: row.description } : {}),
    ...(row.rate_limit_per_second !== null ? { rateLimitPerSecond: row.rate_limit_per_second } : {}),
    health: {
      consecutiveFailures: row.consecutive_failures,
      lastSuccessAt: iso(row.last_success_at),
      lastFailureAt: iso(row.last_failure_at),
      lastFailureCode: row.last_failure_code ?? undefined,
    },
    ownerApiKeyId: row.owner_api_key_id,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
    ...(secret ? { secret } : {}),
  };
}

export function deliveryView(row: DeliveryRow | DeliveryListRow) {
  return {
    deliveryId: row.id,
    eventId: row.event_id,
    eventType: row.event_type,
    subscriptionId: row.subscription_id,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.status === 'pending' ? iso(row.next_attempt_at) : undefined,
    httpStatus: row.http_status ?? undefined,
    failureCode: row.failure_code ?? undefined,
    deliveredAt: iso(row.delivered_at),
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

export function attemptView(row: AttemptRow) {
  return {
    attemptedAt: iso(row.attempted_at)!,
    durationMs: row.duration_ms,
    httpStatus: row.http_status ?? undefined,
    failureCode: row.failure_code ?? undefined,
    error: row.error ?? undefined,
  };
}
