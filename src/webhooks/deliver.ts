import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { lazyChild, type LevelLogger } from '../util/lazy-logger.js';
import type { Clock } from '../clock.js';
import type { Db } from '../db/driver.js';
import { hasScope } from '../auth/scopes.js';
import { WorkLoop, type Claimed } from '../jobs/work-loop.js';
import { WEBHOOKS_CHANNEL, eventScope } from './events.js';
import { HostSlots } from './host-slots.js';
import { WebhookHttpClient, type PostResult } from './http-client.js';
import type { WorkCounters } from '../metrics/counters.js';
import { AUTO_DISABLE_MIN_FAILURES, OutcomeWriter } from './outcome-writer.js';
import { dispatchRepo, type ClaimedDelivery } from './dispatch-repo.js';
import { signatureHeader } from './sign.js';
import type { Resolver } from '../net/guard.js';

export const USER_AGENT = 'M2M-Webhooks/1.0 (tenant-scoped messaging API)';
/** Attempts per cycle: the first plus one per retry delay. */
export const ATTEMPTS_PER_CYCLE = 7;

export interface DispatcherOptions {
  retryDelaysMs: number[];
  attemptTimeoutMs: number;
  allowPrivateDestinations: boolean;
  maxInFlight: number;
  maxInFlightPerHost: number;
  /** WEBHOOK_AUTO_DISABLE_AFTER_MS (see OutcomeWriter). */
  autoDisableAfterMs: number;
  pollIntervalMs: number;
  resolver?: Resolver;
  workerId?: string;
  decryptSecret: (sealed: string) => string;
  counters?: WorkCounters;
}

/** Decrypted signing secrets kept by a dispatcher (one per subscription and rotation). */
const SECRET_CACHE_SIZE = 1_000;
/** Subscriptions a claim visits at most (round robin: the next claim goes on after the last one). */
const CLAIM_SUBSCRIPTIONS = 100;
/** Once caught up with the queue, the dispatcher claims at most this often (see WorkLoopOptions.batchWindowMs). */
const CLAIM_BATCH_WINDOW_MS = 10;
/** On PGlite, where every claim takes the one connection from the outcome writes, claims are further apart. */
const PGLITE_CLAIM_BATCH_WINDOW_MS = 25;

/** Delay before the next attempt after `failedInCycle` failures, with ±10% jitter so retries spread out. */
export function retryDelay(delays: number[], failedInCycle: number): number {
  const base = delays[Math.min(failedInCycle - 1, delays.length - 1)];
  return Math.round(base * (0.9 + Math.random() * 0.2));
}

/**
 * The delivery engine. Deliveries are their own queue: due rows are claimed with FOR UPDATE SKIP LOCKED
 * and a lease (so a crashed worker's deliveries are picked up again: at least once), signed at send time
 * with the subscription's current secret, posted through the SSRF-guarded client, and their outcome and
 * attempt record written in one statement fenced by the lease.
 */
export class WebhookDispatcher {
  readonly workerId: string;
  private readonly client: WebhookHttpClient;
  private readonly loop: WorkLoop;
  private readonly slots: HostSlots;
  /** Attempts claimed but never sent because the dispatcher stopped: their leases are handed back. */
  private readonly unsent: string[] = [];
  /** Attempts whose request is in flight. */
  private readonly sending = new Set<string>();
  /** Set when stop's grace ran out: requests still in flight are ended and their deliveries handed back. */
  private abandoned = false;
  private readonly secrets = new Map<string, string>();
  private readonly leaseMs: number;
  private readonly outcomes: OutcomeWriter;
  private unlisten: (() => void) | undefined;
  private pacedWake: NodeJS.Timeout | undefined;
  private pacedWakeAt = 0;
  /** The round robin of claims over subscriptions: the next claim visits those after this id. */
  private claimAfter = '';

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: DispatcherOptions,
  ) {
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    // Claim to outcome: at most one attempt's wait for a request slot (HostSlots: the attempts waiting ahead are
    // at most the cap, and every request in flight ends within the timeout), the attempt itself, and the write.
    this.leaseMs = options.attemptTimeoutMs * 3 + 5_000;
    this.slots = new HostSlots(options.maxInFlightPerHost, () => this.loop.wake());
    this.outcomes = new OutcomeWriter(db, this.workerId, { afterMs: options.autoDisableAfterMs, minFailures: AUTO_DISABLE_MIN_FAILURES });
    this.client = new WebhookHttpClient({
      allowPrivate: options.allowPrivateDestinations,
      timeoutMs: options.attemptTimeoutMs,
      resolver: options.resolver,
      userAgent: USER_AGENT,
    });
    this.loop = new WorkLoop({
      pollIntervalMs: options.pollIntervalMs,
      maxInFlight: options.maxInFlight,
      batchWindowMs: db.kind === 'pglite' ? PGLITE_CLAIM_BATCH_WINDOW_MS : CLAIM_BATCH_WINDOW_MS,
      claim: (limit) => this.claim(limit),
      onError: (error) => this.log.error({ err: error }, 'webhook dispatcher error'),
    });
  }

  async start(): Promise<void> {
    this.unlisten = await this.db.listen(WEBHOOKS_CHANNEL, () => this.loop.wake());
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  /**
   * Stops claiming and lets in-flight attempts finish for `graceMs`. Attempts still waiting for a request slot
   * are not sent, and requests still in flight after the grace are ended without an outcome: the leases of
   * both are handed back, so the next claim (of any node) attempts them again.
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.unlisten?.();
    clearTimeout(this.pacedWake);
    this.slots.close();
    const left = await this.loop.stop(graceMs);
    const handBack = this.unsent.splice(0);
    if (left > 0) {
      this.abandoned = true;
      handBack.push(...this.sending);
    }
    if (handBack.length > 0) {
      await dispatchRepo.handBack(this.db, this.workerId, handBack).then(
        () => this.log.info({ deliveries: handBack.length }, 'handed back webhook deliveries not attempted before the stop'),
        (error: unknown) => this.log.error({ err: error }, 'could not hand back webhook deliveries'),
      );
    }
    await (this.abandoned ? this.client.destroy() : this.client.close());
  }

  /**
   * Claims up to `limit` due deliveries, at most as many per host as that host has room for (HostSlots), so a
   * busy destination never takes slots it cannot use (nothing is claimed only to be handed back). Candidates
   * are read first without locks, ranked per host, then locked with SKIP LOCKED and re-checked, so two
   * workers never claim the same row.
   */
  private async claim(limit: number): Promise<Claimed> {
    const now = this.clock.now();
    const { hosts, room } = this.slots.claimRoom();
    const { deliveries: rows, pacedWakeAt, nextAfter } = await dispatchRepo.claim(this.db, {
      workerId: this.workerId,
      now,
      leaseUntil: new Date(now.getTime() + this.leaseMs),
      limit,
      subscriptions: CLAIM_SUBSCRIPTIONS,
      after: this.claimAfter,
      hosts,
      room,
      defaultRoom: this.options.maxInFlightPerHost,
    });
    this.claimAfter = nextAfter;
    if (pacedWakeAt) this.wakeAt(pacedWakeAt);
    const left = new Map(hosts.map((host, i) => [host, room[i]]));
    const units: Array<() => Promise<void>> = [];
    for (const row of rows) {
      left.set(row.host, (left.get(row.host) ?? this.options.maxInFlightPerHost) - 1);
      this.slots.hold(row.host);
      let released = false;
      const release = (requested: boolean) => {
        if (released) return;
        released = true;
        this.slots.release(row.host, requested);
      };
      units.push(() => this.attempt(row, release).finally(() => release(false)));
    }
    // A host whose room this claim used up (or that had none) may have more due: claim again as it frees up.
    // So may the subscriptions after those this claim visited. On PGlite a full host waits for the batch window
    // (its releases wake the loop): the claim shares the one thread and connection with the sends and outcome
    // writes, and a claim of the few rows freed since the last one would hold that thread for little work.
    const hostFull = this.db.kind === 'postgres' && [...left.values()].some((n) => n <= 0);
    const more = rows.length === limit || nextAfter !== '' || hostFull;
    return { units, more };
  }

  /** Claims again when a rate-limited subscription may send more (sooner than the poll interval would). */
  private wakeAt(at: Date): void {
    const delay = Math.max(0, at.getTime() - this.clock.now().getTime());
    if (delay >= this.options.pollIntervalMs) return;
    if (this.pacedWake && this.pacedWakeAt <= at.getTime()) return;
    clearTimeout(this.pacedWake);
    this.pacedWakeAt = at.getTime();
    this.pacedWake = setTimeout(() => {
      this.pacedWake = undefined;
      this.loop.wake();
    }, delay);
    this.pacedWake.unref();
  }

  /**
   * The signing secret of a sealed value, decrypted once per value (a rotation seals a new one), not on every
   * attempt. Bounded; the oldest entry goes first.
   */
  private secret(sealed: string): string {
    let secret = this.secrets.get(sealed);
    if (secret === undefined) {
      secret = this.options.decryptSecret(sealed);
      if (this.secrets.size >= SECRET_CACHE_SIZE) this.secrets.delete(this.secrets.keys().next().value as string);
      this.secrets.set(sealed, secret);
    }
    return secret;
  }

  private cancelReason(row: ClaimedDelivery): string | undefined {
    if (row.deleted) return 'subscription deleted';
    if (!row.active) return 'subscription disabled';
    if (!row.key_ok) return 'owning API key revoked or expired';
    if (!hasScope(row.key_scopes, eventScope(row.event_type))) return `owning API key lacks ${eventScope(row.event_type)}`;
    return undefined;
  }

  /**
   * One attempt: waits for a request slot of its host, sends, gives the slot back as soon as the request is
   * over (the cap bounds concurrent requests to a destination), then writes the outcome. The loop's slot,
   * and so the memory the attempt holds, is kept until that outcome is committed.
   */
  private async attempt(row: ClaimedDelivery, release: (requested: boolean) => void): Promise<void> {
    const log = lazyChild(this.log, { deliveryId: row.id, eventId: row.event_id, tenantId: row.tenant_id });
    const reason = this.cancelReason(row);
    if (reason) {
      release(false);
      await this.cancel(row);
      log.info({ reason }, 'webhook delivery canceled');
      return;
    }
    if (!(await this.slots.acquire(row.host))) {
      release(false);
      this.unsent.push(row.id);
      return;
    }
    const startedAt = this.clock.now();
    this.sending.add(row.id);
    const result = await this.send(row, startedAt, log);
    this.sending.delete(row.id);
    release(true);
    if (this.abandoned) return;
    await this.record(row, startedAt, result);
    const fields = { httpStatus: result.httpStatus, failureCode: result.failureCode, durationMs: Math.round(result.durationMs) };
    if (result.ok) log.debug(fields, 'webhook delivered');
    else log.info({ ...fields, error: result.errorMessage }, 'webhook attempt failed');
  }

  private async cancel(row: ClaimedDelivery): Promise<void> {
    await dispatchRepo.cancel(this.db, this.workerId, row, this.clock.now());
  }

  private async send(row: ClaimedDelivery, startedAt: Date, log: LevelLogger): Promise<PostResult> {
    try {
      const secret = this.secret(row.secret_sealed);
      const timestamp = Math.floor(startedAt.getTime() / 1000);
      return await this.client.post(row.url, row.body, {
        'x-service-event-id': row.event_id,
        'x-service-signature': signatureHeader(secret, timestamp, row.body),
      });
    } catch (error) {
      // The client classifies network failures itself; reaching here means a bug or an unreadable secret.
      log.error({ err: error }, 'webhook attempt could not be made');
      return { ok: false, failureCode: 'connection', errorMessage: 'internal error preparing the attempt', durationMs: 0 };
    }
  }

  /** Outcome and attempt record, batched with other attempts; the lease check keeps a late worker from overwriting. */
  private async record(row: ClaimedDelivery, startedAt: Date, result: PostResult): Promise<void> {
    const now = this.clock.now();
    const failedInCycle = row.cycle_attempts + 1;
    let status: 'delivered' | 'pending' | 'failed';
    let nextAttemptAt: Date | null = null;
    if (result.ok) status = 'delivered';
    else if (failedInCycle >= ATTEMPTS_PER_CYCLE) status = 'failed';
    else {
      status = 'pending';
      nextAttemptAt = new Date(now.getTime() + retryDelay(this.options.retryDelaysMs, failedInCycle));
    }
    await this.outcomes.write({
      deliveryId: row.id,
      tenantId: row.tenant_id,
      subscriptionId: row.subscription_id,
      status,
      nextAttemptAt,
      httpStatus: result.httpStatus ?? null,
      failureCode: result.ok ? null : (result.failureCode ?? 'connection'),
      finishedAt: now,
      startedAt,
      durationMs: result.durationMs,
      error: result.errorMessage ?? null,
    });
    this.options.counters?.webhookAttempt(status === 'pending' ? 'retrying' : status);
  }
}
