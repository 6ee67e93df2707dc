import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import type { Static } from 'typebox';
import { insufficientScope } from '../auth/keys.js';
import { actingKey, transactionOf, type Ctx } from '../context.js';
import { hasScope, missingScopes } from '../auth/scopes.js';
import { DomainError, conflict, invalid, notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { newId } from '../ids.js';
import { decryptSecret, encryptSecret, type Keyring } from '../secrets.js';
import { isoMicros } from '../util/time.js';
import { isEventType } from '../events/types.js';
import { EVENT_TYPES, WEBHOOKS_CHANNEL, eventScope, emitUnchecked, requiredScopesFor, type EventType } from './events.js';
import { RECOVER_START, deliveryRepo, subscriptionRepo, type SubscriptionRow } from './repo.js';
import { attemptView, deliveryView, subscriptionView } from './views.js';
import { newWebhookSecret } from './sign.js';
import { validateWebhookUrl, type Resolver } from '../net/guard.js';
import { destinationRefusal } from './destination-check.js';
import type { CreateSubscriptionBody, DeliveryListQuery, DeliveryParams, RecoverBody, SubscriptionParams, UpdateSubscriptionBody } from './schema.js';

type SubscriptionRef = Static<typeof SubscriptionParams>;
type DeliveryRef = Static<typeof DeliveryParams>;

export const MAX_SUBSCRIPTIONS_PER_TENANT = 50;
const RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
/** Deliveries restarted per statement by recover: each batch is its own short transaction. */
const RECOVER_BATCH = 500;

export interface WebhookServiceDeps {
  db: Db;
  clock: Clock;
  keyring: Keyring;
  cursors: Cursors;
  allowPrivateDestinations: boolean;
  /** DNS for the destination check at create and PATCH (tests inject one). */
  resolver?: Resolver;
}

/** Subscriptions, delivery inspection and retry; the rules of who may receive what. */
export class WebhookService {
  constructor(private readonly deps: WebhookServiceDeps) {}

  /** The URL's static rules, then where its host resolves now (refused when any answer is non-public). */
  private async checkUrl(raw: string): Promise<{ url: string; host: string }> {
    const result = validateWebhookUrl(raw, { allowPrivate: this.deps.allowPrivateDestinations });
    if (!result.ok) throw invalid('body.url', result.reason);
    const host = result.url.hostname.toLowerCase();
    const refusal = await destinationRefusal(host, { allowPrivate: this.deps.allowPrivateDestinations, resolver: this.deps.resolver });
    if (refusal) throw invalid('body.url', refusal);
    return { url: result.url.toString(), host };
  }

  private checkEvents(events: string[]): EventType[] {
    const unknown = events.filter((type) => !isEventType(type));
    if (unknown.length > 0) throw invalid('body.events', `unknown event types: ${unknown.join(', ')}`);
    return [...new Set(events.filter(isEventType))];
  }

  /** Creating or changing a subscription needs webhooks:write and the read scope of every selected event type. */
  private checkEventScopes(ctx: Ctx, events: string[]): { id: string } {
    const key = actingKey(ctx.actor);
    if (!key) throw new DomainError('M2M_INVALID_REQUEST', 'a webhook subscription is owned by the API key that creates or changes it');
    const required = ['webhooks:write', ...requiredScopesFor(events)];
    const missing = missingScopes(key.scopes, required);
    if (missing.length > 0) throw insufficientScope(required, missing);
    return key;
  }

  async create(ctx: Ctx, input: Static<typeof CreateSubscriptionBody>) {
    const events = this.checkEvents(input.events);
    const owner = this.checkEventScopes(ctx, events);
    const { url, host } = await this.checkUrl(input.url);
    const secret = newWebhookSecret();
    return transactionOf(this.deps.db, ctx, async (tx) => {
      await subscriptionRepo.lockTenant(tx, ctx.tenantId);
      if ((await subscriptionRepo.count(tx, ctx.tenantId)) >= MAX_SUBSCRIPTIONS_PER_TENANT) {
        throw conflict(`a business can have at most ${MAX_SUBSCRIPTIONS_PER_TENANT} webhook subscriptions; delete one first`);
      }
      const row = await subscriptionRepo.insert(tx, {
        id: newId('whk'),
        tenant_id: ctx.tenantId,
        url,
        host,
        events,
        active: input.active ?? true,
        description: input.description ?? null,
        owner_api_key_id: owner.id,
        secret_sealed: encryptSecret(this.deps.keyring.encryptionKey, secret),
        rate_limit_per_second: input.rateLimitPerSecond ?? null,
        now: this.deps.clock.now(),
      });
      return subscriptionView(row, secret);
    });
  }

  async list(ctx: Ctx) {
    return { subscriptions: (await subscriptionRepo.list(this.deps.db, ctx.tenantId)).map((row) => subscriptionView(row)) };
  }

  async get(ctx: Ctx, input: SubscriptionRef) {
    return subscriptionView(await this.require(this.deps.db, ctx.tenantId, input.subscriptionId));
  }

  private async require(db: Db | Tx, tenantId: string, id: string, lock = false): Promise<SubscriptionRow> {
    const row = await subscriptionRepo.get(db, tenantId, id, lock);
    if (!row) throw notFound('webhook subscription');
    return row;
  }

  /**
   * Only supplied fields change; the caller's key must hold the read scopes of the resulting event types
   * and becomes the owner. Disabling cancels pending deliveries; removing an event type cancels its pending
   * deliveries. Re-enabling does not replay anything and clears disabledReason.
   */
  async update(ctx: Ctx, { subscriptionId: id, ...patch }: SubscriptionRef & Static<typeof UpdateSubscriptionBody>) {
    const events = patch.events ? this.checkEvents(patch.events) : undefined;
    const target = patch.url !== undefined ? await this.checkUrl(patch.url) : undefined;
    return this.deps.db.transaction(async (tx) => {
      const current = await this.require(tx, ctx.tenantId, id, true);
      const nextEvents = events ?? current.events;
      const owner = this.checkEventScopes(ctx, nextEvents);
      const now = this.deps.clock.now();
      const active = patch.active ?? current.active;
      const rateLimitPerSecond = patch.rateLimitPerSecond === undefined ? current.rate_limit_per_second : patch.rateLimitPerSecond;
      const row = await subscriptionRepo.update(tx, ctx.tenantId, id, {
        url: target?.url ?? current.url,
        host: target?.host ?? current.host,
        events: nextEvents,
        active,
        description: patch.description === undefined ? current.description : patch.description === '' ? null : patch.description,
        ownerApiKeyId: owner.id,
        rateLimitPerSecond,
        now,
      });
      if (!active) await deliveryRepo.cancelForSubscription(tx, ctx.tenantId, id, now);
      else {
        const removed = current.events.filter((type) => !nextEvents.includes(type));
        if (removed.length > 0) await deliveryRepo.cancelForSubscription(tx, ctx.tenantId, id, now, removed);
      }
      return subscriptionView(row);
    });
  }

  async remove(ctx: Ctx, { subscriptionId: id }: SubscriptionRef): Promise<void> {
    await this.deps.db.transaction(async (tx) => {
      const now = this.deps.clock.now();
      if (!(await subscriptionRepo.softDelete(tx, ctx.tenantId, id, now))) throw notFound('webhook subscription');
      await deliveryRepo.cancelForSubscription(tx, ctx.tenantId, id, now);
    });
  }

  /** New secret, used from the next attempt on. */
  async rotateSecret(ctx: Ctx, { subscriptionId: id }: SubscriptionRef) {
    const secret = newWebhookSecret();
    const row = await subscriptionRepo.setSecret(
      ctx.tx ?? this.deps.db,
      ctx.tenantId,
      id,
      encryptSecret(this.deps.keyring.encryptionKey, secret),
      this.deps.clock.now(),
    );
    if (!row) throw notFound('webhook subscription');
    return subscriptionView(row, secret);
  }

  decryptSecret(sealed: string): string {
    return decryptSecret(this.deps.keyring.encryptionKey, sealed);
  }

  async listDeliveries(ctx: Ctx, { subscriptionId, ...query }: SubscriptionRef & Static<typeof DeliveryListQuery>) {
    const limit = query.limit ?? 50;
    const filters = { tenantId: ctx.tenantId, subscriptionId, status: query.status ?? null };
    const after = query.cursor
      ? await this.deps.cursors.decodeAfter<{ createdAt: string; id: string }>('webhook-deliveries', filters, query.cursor, () =>
          this.require(this.deps.db, ctx.tenantId, subscriptionId),
        )
      : undefined;
    const rows = await deliveryRepo.listPage(this.deps.db, ctx.tenantId, subscriptionId, { status: query.status, limit: limit + 1, after });
    if (!rows) throw notFound('webhook subscription');
    const { page, hasMore, next } = this.deps.cursors.page('webhook-deliveries', filters, rows, limit, (last) => ({ createdAt: isoMicros(last.created_us), id: last.id }));
    return { deliveries: page.map(deliveryView), ...next, hasMore };
  }

  async getDelivery(ctx: Ctx, { subscriptionId, deliveryId }: DeliveryRef) {
    // Like the list: a deleted (or foreign) subscription has no readable deliveries.
    await this.require(this.deps.db, ctx.tenantId, subscriptionId);
    const row = await deliveryRepo.get(this.deps.db, ctx.tenantId, subscriptionId, deliveryId);
    if (!row) throw notFound('webhook delivery');
    return { delivery: deliveryView(row) };
  }

  async listAttempts(ctx: Ctx, input: DeliveryRef) {
    await this.getDelivery(ctx, input);
    return { attempts: (await deliveryRepo.attempts(this.deps.db, ctx.tenantId, input.deliveryId)).map(attemptView) };
  }

  /** A failed delivery starts a new cycle of attempts with the same event id; any other state is 409. */
  async retryDelivery(ctx: Ctx, { subscriptionId, deliveryId }: DeliveryRef) {
    return this.deps.db.transaction(async (tx) => {
      const subscription = await this.require(tx, ctx.tenantId, subscriptionId);
      const current = await deliveryRepo.get(tx, ctx.tenantId, subscriptionId, deliveryId);
      if (!current) throw notFound('webhook delivery');
      if (current.status !== 'failed') {
        throw conflict(`only a failed delivery can be retried; this one is ${current.status}`, { status: current.status });
      }
      if (!subscription.active) throw conflict('the subscription is disabled; enable it before retrying');
      const row = await deliveryRepo.restart(tx, ctx.tenantId, deliveryId, this.deps.clock.now());
      if (!row) throw conflict('the delivery changed state; read it again');
      tx.notify(WEBHOOKS_CHANNEL);
      return { delivery: deliveryView(row) };
    });
  }

  /**
   * Every failed delivery of the subscription whose event occurred in [since, until) starts a new cycle with
   * the same event id, in batches that each commit on their own (no long transaction over a large backlog).
   * Canceled deliveries are not recovered.
   */
  async recover(ctx: Ctx, { subscriptionId, since, until }: SubscriptionRef & Static<typeof RecoverBody>) {
    const subscription = await this.require(this.deps.db, ctx.tenantId, subscriptionId);
    const now = this.deps.clock.now();
    const window = { since: new Date(since), until: until === undefined ? now : new Date(until) };
    if (window.since.getTime() < now.getTime() - RETENTION_MS) throw invalid('body.since', 'must be within the last 30 days');
    if (window.until.getTime() <= window.since.getTime()) throw invalid('body.until', 'must be after since');
    if (!subscription.active) throw conflict('the subscription is disabled; enable it before recovering');
    let recovered = 0;
    let after = RECOVER_START;
    for (;;) {
      const batch = await this.deps.db.transaction(async (tx) => {
        const result = await deliveryRepo.restartFailedBatch(tx, ctx.tenantId, subscriptionId, window, now, after, RECOVER_BATCH);
        if (result.restarted > 0) tx.notify(WEBHOOKS_CHANNEL);
        return result;
      });
      recovered += batch.restarted;
      if (batch.taken < RECOVER_BATCH || !batch.last) return { recovered };
      after = batch.last;
    }
  }

  /** Emits a synthetic event (admin API: lets a dashboard or test exercise an endpoint end to end). */
  async emitTestEvent(tenantId: string, type: string, data: Record<string, unknown>) {
    if (!isEventType(type)) throw invalid('body.type', `unknown event type ${type}`);
    return this.deps.db.transaction((tx) => emitUnchecked(tx, this.deps.clock.now(), tenantId, type, data));
  }

  /** Key revoked or downscoped: cancel pending deliveries the key may no longer receive. */
  async onApiKeyChanged(tx: Tx, change: { tenantId: string; apiKeyId: string; scopes: string[]; revoked: boolean }): Promise<void> {
    const now = this.deps.clock.now();
    if (change.revoked) {
      await deliveryRepo.cancelForOwner(tx, change.tenantId, change.apiKeyId, now);
      return;
    }
    const lost = EVENT_TYPES.filter((type) => !hasScope(change.scopes, eventScope(type)));
    if (lost.length > 0) await deliveryRepo.cancelForOwner(tx, change.tenantId, change.apiKeyId, now, lost);
  }

  async purgeExpired(): Promise<number> {
    return deliveryRepo.purge(this.deps.db, new Date(this.deps.clock.now().getTime() - RETENTION_MS));
  }
}

